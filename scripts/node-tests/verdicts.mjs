// How a run of one of Node's child_process tests against cordon/child_process
// is read (test/node-tests/node-tests.test.ts, scripts/node-tests/run.mjs):
// what cordon/child_process does not offer, and the known differences, each
// said in docs/child-process.md.

/** A test's short name: its file without test-child-process- and the extension. */
export const short = (file) => file.replace(/^test-child-process-/, '').replace(/\.m?js$/, '');

// Known differences: the file (without test-child-process- and .js) and why.
export const DIFFERENCES = {
  cwd: "child.pid is undefined until 'spawn' (cordon learns the pid from the anchor), where Node knows it when spawn() returns",
  'exec-error': "child.pid is undefined until 'spawn' (cordon learns the pid from the anchor)",
  detached: "the test expects a detached grandchild to outlive the child that started it: cordon ends it with the tree when the root exits (leftovers: 'kill'), which is its purpose",
  'pipe-dataflow': "the test reads the stream's _handle (Node's libuv pipe) to check nobody reads it: cordon's streams are not Node's pipe sockets, and the host relays another child's output",
};

// What cordon/child_process does not offer, read off a failed run.
export function notOffered(file, cordon) {
  if (cordon.missing.includes('fork') || /export named 'fork'|\bfork is not a function|does not support fork\(\)/.test(cordon.stderr) || /^test-child-process-fork/.test(file)) return 'fork() (an IPC channel) is not offered by cordon/child_process';
  if (/does not support stdio 'ipc'|ERR_IPC_ONE_PIPE|ERR_CHILD_PROCESS_IPC_REQUIRED/.test(cordon.stderr)) return "stdio 'ipc' (an IPC channel) is not offered by cordon/child_process";
  if (cordon.missing.includes('ChildProcess')) return 'the ChildProcess class is not exported (a ChildProcess constructed by the caller would spawn outside cordon)';
  if (cordon.flags.includes('--expose-internals')) return "the test patches Node's internal child_process, which cordon/child_process does not call";
  return undefined;
}

