// Options that execa and node:child_process take and cordon does not (or takes
// under another name, or only in run()): what to use instead, for the
// unknown-option error. Pure: a table and one look-up.

/** Where the unknown option was passed. */
export type OptionSite = 'spawn' | 'run';

/** run()'s own options (spawn() gives streams instead). */
const RUN_ONLY = 'is an option of run(), which collects the output; spawn() gives the streams instead (proc.stdout, proc.lines(), `for await (const line of proc)`)';

/** What a name means elsewhere and cordon's way to do it: every site, or a text per site. */
const HINTS: Record<string, string | Partial<Record<OptionSite, string>>> = {
  cancelSignal: 'cordon\'s is "signal" (an AbortSignal: aborting terminates the whole tree with interruptGrace; the result\'s reason is \'canceled\')',
  forceKillAfterDelay: 'cordon\'s is "grace" (ms from the polite signal to the forced kill of the whole tree, default 3000) and "interruptGrace" for abort and timeout (default 500)',
  gracefulCancel: 'cordon has no IPC channel to share an AbortSignal with the command; use the "stop" hook to ask it to stop (e.g. write to its stdin), then "signal" or "timeout"',
  cleanup: 'cordon always does it and it cannot be turned off: a tree ends when its host exits, is killed or crashes; to outlive the host use "lease"',
  detached: 'cordon has none: a tree is always contained and ends with its host; use "lease" for a tree that outlives its host, or "leftovers: \'keep\'" for members that outlive the root',
  buffer: { run: 'run() has none: it always collects (bounded by "maxBuffer"); use spawn() to read the streams yourself', spawn: 'spawn() never buffers: read proc.stdout, proc.lines() or `for await (const line of proc)`' },
  lines: 'cordon has no option for it: iterate spawn()\'s process (`for await (const line of proc)`, or proc.lines({ from })), or split run()\'s stdout',
  verbose: 'cordon has none: NODE_DEBUG=cordon logs cordon\'s own steps to stderr; to show the command\'s output pass stdout/stderr \'inherit\'',
  node: 'cordon has none: run the Node binary yourself, run(process.execPath, [script, ...args])',
  nodeOptions: 'cordon has none: pass them as arguments, run(process.execPath, [...process.execArgv, script])',
  nodePath: 'cordon has none: pass the Node binary as the command',
  ipc: 'cordon has no IPC channel: talk to the command through its stdin and stdout',
  ipcInput: 'cordon has no IPC channel: give the command its input with "input" (run()) or proc.stdin',
  serialization: 'cordon has no IPC channel, so nothing to serialize',
  windowsHide: 'cordon has no such option',
  windowsVerbatimArguments: 'cordon has none: it quotes each argument itself; for a cmd.exe line use "shell: true"',
  inputFile: { spawn: RUN_ONLY },
  input: { spawn: `${RUN_ONLY}; with spawn() write to proc.stdin` },
  maxBuffer: { spawn: RUN_ONLY },
  reject: { spawn: `${RUN_ONLY}; spawn()'s result never rejects on an exit code` },
  encoding: { spawn: `${RUN_ONLY}; with spawn() call proc.stdout.setEncoding()` },
  all: { spawn: `${RUN_ONLY}; with spawn() use proc.lines({ from: 'all' })` },
  stripFinalNewline: { spawn: RUN_ONLY },
  stdin: { spawn: 'spawn() takes "stdio": [stdin, stdout, stderr]' },
  stdout: { spawn: 'spawn() takes "stdio": [stdin, stdout, stderr]' },
  stderr: { spawn: 'spawn() takes "stdio": [stdin, stdout, stderr]' },
};

/** What to use instead of `key` at `site`, if cordon knows the name from execa or child_process. */
export function optionHint(key: string, site: OptionSite): string | undefined {
  if (!Object.hasOwn(HINTS, key)) return undefined;
  const hint = HINTS[key]!;
  return typeof hint === 'string' ? hint : hint[site];
}
