// The libraries compared, each used the way its documentation says to stop a
// command, with its defaults:
//   cordon         spawn() ... proc.terminate()  (SIGTERM to every member, SIGKILL after the 3 s grace)
//   child_process  spawn() ... child.kill()      (SIGTERM to the root)
//   detached       spawn({ detached: true }) ... process.kill(-pid, 'SIGTERM')  (the root's process group)
//   execa          execa() ... subprocess.kill() (SIGTERM to the root, SIGKILL after forceKillAfterDelay 5 s)
//   tree-kill      spawn() ... treeKill(pid)     (SIGTERM to the root's descendants as `ps --ppid` lists them)
// "Completion" is what a caller awaits: cordon's proc.result, child_process's
// 'close' (exit + output streams closed), execa's promise.
import { spawn as spawnChild } from 'node:child_process';
import { createRequire } from 'node:module';
import { execa } from 'execa';
import { spawn as cordonSpawn } from '../../dist/index.js';

const require = createRequire(import.meta.url);
const treeKill = require('tree-kill');

function collector() {
  let text = '';
  return {
    add(chunk) {
      text += chunk;
    },
    get text() {
      return text;
    },
  };
}

/** Resolves with performance.now() when `promise` settles (either way). */
function settleTime(promise) {
  return promise.then(
    (value) => ({ at: performance.now(), ok: true, value }),
    (error) => ({ at: performance.now(), ok: false, error }),
  );
}

function closeOf(child) {
  return new Promise((resolve) => {
    child.once('close', (code, signal) => resolve({ at: performance.now(), ok: true, value: { code, signal } }));
    child.once('error', (error) => resolve({ at: performance.now(), ok: false, error }));
  });
}

function watchOutput(stdout, stderr) {
  const out = collector();
  stdout?.setEncoding('utf8');
  stdout?.on('data', (c) => out.add(c));
  stderr?.resume();
  return out;
}

function plainStart(command, args, env, extra = {}) {
  const child = spawnChild(command, args, { env, ...extra });
  const out = watchOutput(child.stdout, child.stderr);
  return { child, out, completion: closeOf(child), rootPid: () => child.pid };
}

export const libraries = [
  {
    name: 'cordon',
    how: 'spawn() + proc.terminate() (grace 3 s)',
    start(command, args, env) {
      const proc = cordonSpawn(command, args, { env });
      const out = watchOutput(proc.stdout, proc.stderr);
      return {
        out,
        completion: settleTime(proc.result),
        rootPid: () => proc.pid,
        cancel: () => void proc.terminate().catch(() => {}),
      };
    },
  },
  {
    name: 'child_process',
    how: "spawn() + child.kill() (SIGTERM to the root)",
    start(command, args, env) {
      const h = plainStart(command, args, env);
      return { ...h, cancel: () => void h.child.kill() };
    },
  },
  {
    name: 'detached + kill(-pid)',
    how: "spawn({ detached: true }) + process.kill(-pid, 'SIGTERM')",
    start(command, args, env) {
      const h = plainStart(command, args, env, { detached: true });
      return {
        ...h,
        cancel: () => {
          try {
            process.kill(-h.child.pid, 'SIGTERM');
          } catch {
            // the group is gone
          }
        },
      };
    },
  },
  {
    name: 'execa',
    how: 'execa() + subprocess.kill() (SIGKILL after 5 s)',
    start(command, args, env) {
      const sub = execa(command, args, { env, extendEnv: false });
      const out = watchOutput(sub.stdout, sub.stderr);
      return { out, completion: settleTime(sub), rootPid: () => sub.pid, cancel: () => void sub.kill() };
    },
  },
  {
    name: 'tree-kill',
    how: 'spawn() + treeKill(pid) (SIGTERM)',
    start(command, args, env) {
      const h = plainStart(command, args, env);
      return { ...h, cancel: () => treeKill(h.child.pid, 'SIGTERM', () => {}) };
    },
  },
];

export function library(name) {
  const lib = libraries.find((l) => l.name === name);
  if (!lib) throw new Error(`unknown library ${name}`);
  return lib;
}
