// The whole run must leave zero processes behind: after every test file has
// finished, no process may still carry a tag of this run. Leaks are SIGKILLed
// by pid and fail the run. Tags start with a per-run id, so two runs on one
// machine never touch each other's processes.
//
// The run says once which observer looks at the processes (/proc or ps, see
// observer.ts): a run with CORDON_TEST_OBSERVER=ps shows it used ps.
//
// Nor any cgroup (the cgroup tier): a tree's cgroup, cordon-<anchor pid>-<suffix>
// below this process's cgroup, must be gone with the tree. One that appeared
// during the run and is still there fails it (and is removed, if empty).
import { readdirSync, rmdirSync } from 'node:fs';
import { cgroupMount, cgroupOf, cgroupWritable } from './cgroup.js';
import { observer, OBSERVER_VAR } from './observer.js';
import { describeProcs, findTagged, killPids, RUN_VAR } from './procs.js';

function treeCgroups(): { dir: string; names: Set<string> } | undefined {
  if (process.platform !== 'linux' || !cgroupWritable()) return undefined;
  const own = cgroupOf('self')!;
  const dir = own === '/' ? cgroupMount()! : cgroupMount()! + own;
  return { dir, names: new Set(readdirSync(dir).filter((n) => /^cordon-\d+(-[0-9a-f]+)?$/.test(n))) };
}

// Vitest calls the global setup once per project, each with its own copy of
// this module: the mark that the observer was printed lives on globalThis.
const SHOWN = Symbol.for('cordon.test.observerShown');

export default function setup() {
  process.env[RUN_VAR] ??= `r${process.pid}${Math.random().toString(36).slice(2, 6)}`;
  const asked = process.env[OBSERVER_VAR];
  const g = globalThis as { [SHOWN]?: boolean };
  if (!g[SHOWN]) console.log(`process observer: ${observer.name} (${asked ? `${OBSERVER_VAR}=${asked}` : `the default on ${process.platform}`})`);
  g[SHOWN] = true;
  const before = treeCgroups();
  return () => {
    const left = findTagged();
    if (left.length > 0) {
      killPids(left.map((p) => p.pid));
      throw new Error(`the test run left processes behind (now SIGKILLed):\n${describeProcs(left)}`);
    }
    const after = treeCgroups();
    const leaked = after ? [...after.names].filter((n) => !before?.names.has(n)) : [];
    if (leaked.length > 0) {
      for (const n of leaked) {
        try {
          rmdirSync(`${after!.dir}/${n}`);
        } catch {
          // not empty, or another run's that is still alive
        }
      }
      throw new Error(`the test run left cgroups behind: ${leaked.map((n) => `${after!.dir}/${n}`).join(', ')}`);
    }
  };
}
