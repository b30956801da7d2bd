// The libraries compared, each used the way its documentation says to stop a
// command, with its defaults:
//   cordon         spawn() ... proc.terminate()  (SIGTERM to every member, SIGKILL after the 3 s grace)
//   child_process  spawn() ... child.kill()      (SIGTERM to the root)
//   detached       spawn({ detached: true }) ... process.kill(-pid, 'SIGTERM')  (the root's process group)
//   execa          execa() ... subprocess.kill() (SIGTERM to the root, SIGKILL after forceKillAfterDelay 5 s)
//   execa 10       execa(..., { killDescendants: true }) ... subprocess.kill() (SIGTERM to the root's process
//                  group, SIGKILL to it after 5 s); execa 10 needs Node 22+: on an older Node it runs in a
//                  peer under CI's Node 24 (bench/peers/execa10), or is skipped when there is none
//   tree-kill      spawn() ... treeKill(pid)     (SIGTERM to the root's descendants as `ps --ppid` lists them)
// "Completion" is what a caller awaits: cordon's proc.result, child_process's
// 'close' (exit + output streams closed), execa's promise.
import { spawn as spawnChild } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execa } from 'execa';
import { spawn as cordonSpawn } from '../../dist/index.js';
import { addSpawner } from './procs.mjs';

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
export function settleTime(promise) {
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

export function watchOutput(stdout, stderr) {
  const out = collector();
  stdout?.setEncoding('utf8');
  stdout?.on('data', (c) => out.add(c));
  stderr?.resume();
  return out;
}

export function plainStart(command, args, env, extra = {}) {
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

// ------------------------------------------------------------------ execa 10

const here = dirname(fileURLToPath(import.meta.url));
const EXECA10_DIR = join(here, '..', 'peers', 'execa10');
const EXECA10_ENTRY = join(EXECA10_DIR, 'node_modules', 'execa', 'index.js');
/** The Node 24 that .ci/run fetches (CORDON_BENCH_NODE24 overrides). */
const NODE24 = process.env.CORDON_BENCH_NODE24 || join(process.env.CORDON_CI_CACHE || join(homedir(), '.cache', 'cordon-ci'), 'node24', 'package', 'bin', 'node');
const nodeMajor = Number(process.versions.node.split('.')[0]);

function execa10Status() {
  if (!existsSync(EXECA10_ENTRY)) return { skipped: 'skipped: not installed (npm install --prefix bench/peers/execa10)' };
  const version = JSON.parse(readFileSync(join(EXECA10_DIR, 'node_modules', 'execa', 'package.json'), 'utf8')).version;
  if (nodeMajor >= 22) return { version, mode: 'in-process', node: process.version };
  if (existsSync(NODE24)) return { version, mode: 'peer', node: NODE24 };
  return { skipped: `skipped: needs Node 22+ (this is ${process.version}; no Node 24 at ${NODE24})` };
}
export const execa10 = execa10Status();

const execa10Fn = execa10.mode === 'in-process' ? (await import(pathToFileURL(EXECA10_ENTRY).href)).execa : undefined;

let peer;
function execa10Peer() {
  if (peer) return peer;
  const child = spawnChild(execa10.node, [join(EXECA10_DIR, 'peer.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
  addSpawner(child.pid);
  const subs = new Map();
  createInterface({ input: child.stdout }).on('line', (line) => {
    const msg = JSON.parse(line);
    subs.get(msg.id)?.(msg);
  });
  let next = 0;
  peer = {
    child,
    start(command, args, env, onMessage) {
      const id = ++next;
      subs.set(id, onMessage);
      child.stdin.write(JSON.stringify({ op: 'start', id, command, args, env }) + '\n');
      return { cancel: () => child.stdin.write(JSON.stringify({ op: 'cancel', id }) + '\n') };
    },
  };
  child.unref();
  return peer;
}

/** Ends the execa 10 peer, if one was started (whatever it ran has been swept by tag). */
export function stopPeers() {
  peer?.child.stdin.end();
  peer = undefined;
}

if (!execa10.skipped) {
  libraries.push({
    name: 'execa 10',
    how: 'execa(..., { killDescendants: true }) + subprocess.kill() (the group; SIGKILL after 5 s)',
    hostNode: execa10.mode === 'peer' ? execa10.node : undefined,
    start(command, args, env) {
      if (execa10Fn) {
        const sub = execa10Fn(command, args, { env, extendEnv: false, killDescendants: true });
        const out = watchOutput(sub.stdout, sub.stderr);
        return { out, completion: settleTime(sub), rootPid: () => sub.pid, cancel: () => void sub.kill() };
      }
      const out = collector();
      let pid;
      let settle;
      const completion = new Promise((r) => (settle = r));
      const handle = execa10Peer().start(command, args, env, (msg) => {
        if (msg.ev === 'out') out.add(msg.text);
        else if (msg.ev === 'pid') pid = msg.pid;
        else if (msg.ev === 'settled') settle({ ...msg, at: msg.at - performance.timeOrigin });
      });
      return { out, completion, rootPid: () => pid, cancel: handle.cancel };
    },
  });
}

export function library(name) {
  const lib = libraries.find((l) => l.name === name);
  if (!lib) throw new Error(`unknown library ${name}`);
  return lib;
}
