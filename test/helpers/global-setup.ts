// The whole run must leave zero processes behind: after every test file has
// finished, no process may still carry a tag of this run. Leaks are SIGKILLed
// by pid and fail the run. Tags start with a per-run id, so two runs on one
// machine never touch each other's processes.
//
// The run says once which observer looks at the processes (/proc or ps, see
// observer.ts): a run with CORDON_TEST_OBSERVER=ps shows it used ps. It probes
// what the suite needs besides Node (requirements.ts) once, says what it
// found, and hands the answers to the test workers in the environment.
//
// Nor any cgroup (the cgroup tier): a tree's cgroup, cordon-<anchor pid>-<suffix>
// below this process's cgroup, must be gone with the tree. One that appeared
// during the run and is still there fails it (and is removed, if empty).
//
// Vitest reports an error thrown by a global teardown ("error during close")
// but keeps its exit status 0 and its JSON report's success, so a teardown
// that finds a leak sets the exit status itself (failRun): the lane then
// counts as failed in .ci/run's summary, the report being green.
import { existsSync, rmdirSync, unlinkSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { allowanceLine, measureAllowance } from './allowance.js';
import { cgroupWritable } from './cgroup.js';
import { ALLOWANCE_VAR } from './common.mjs';
import { observer, OBSERVER_VAR } from './observer.js';
import { describeProcs, killTagged, RUN_VAR } from './procs.js';
import { probeAll, REQUIREMENTS_VAR, requirementsLine } from './requirements.js';
import { testLogPath, testsThatSaw, treeCgroupDir, treeCgroupNames } from './test-log.js';

function treeCgroups(): { dir: string; names: Set<string> } | undefined {
  const dir = cgroupWritable() ? treeCgroupDir() : undefined;
  return dir ? { dir, names: new Set(treeCgroupNames(dir)) } : undefined;
}

// Vitest calls the global setup once per project, each with its own copy of
// this module: the mark that the observer was printed, and the requirements
// found, live on globalThis.
const SHOWN = Symbol.for('cordon.test.observerShown');
const PROBED = Symbol.for('cordon.test.requirements');
const MEASURED = Symbol.for('cordon.test.allowance');

function failRun(message: string): never {
  process.exitCode = 1;
  throw new Error(message);
}

export default async function setup() {
  process.env[RUN_VAR] ??= `r${process.pid}${Math.random().toString(36).slice(2, 6)}`;
  const asked = process.env[OBSERVER_VAR];
  const g = globalThis as { [SHOWN]?: boolean; [PROBED]?: string; [MEASURED]?: string };
  if (!g[SHOWN]) console.log(`process observer: ${observer.name} (${asked ? `${OBSERVER_VAR}=${asked}` : `the default on ${process.platform}`})`);
  if (!g[SHOWN]) {
    process.on('exit', () => {
      try {
        unlinkSync(testLogPath());
      } catch {
        // no test ran
      }
    });
  }
  g[SHOWN] = true;
  if (g[PROBED] === undefined) {
    const found = probeAll();
    console.log(requirementsLine(found));
    g[PROBED] = JSON.stringify(found);
  }
  // The timing allowance of promised bounds (allowance.ts), measured once,
  // before any test loads the machine; CORDON_TEST_ALLOWANCE_MS set by hand
  // is used as it is (kept between the floor and the cap).
  if (g[MEASURED] === undefined) {
    const given = process.env[ALLOWANCE_VAR];
    if (given !== undefined && given !== '') {
      console.log(`timing allowance: ${given} ms (${ALLOWANCE_VAR} given)`);
      g[MEASURED] = given;
    } else {
      const m = await measureAllowance();
      console.log(allowanceLine(m));
      g[MEASURED] = String(m.allowance);
    }
  }
  // The workers inherit this process's environment.
  process.env[REQUIREMENTS_VAR] = g[PROBED];
  process.env[ALLOWANCE_VAR] = g[MEASURED];
  const before = treeCgroups();
  return async () => {
    // killTagged (procs.ts): SIGSTOP as each walk reads, until 10 walks in a row
    // find nothing tagged running unstopped; SIGKILL all; walks until 5 in a row
    // find nothing alive (a hopper a walk missed sends it back to the freeze).
    const left = killTagged();
    if (left.length > 0) {
      failRun(`the test run left processes behind (now SIGKILLed):\n${describeProcs(left)}`);
    }
    // A tree's cgroup is named after its anchor (cordon-<anchor pid>-…). This
    // run's anchors carry its tags and are gone now; a cgroup whose anchor is
    // still alive is another run's on this machine (a concurrent suite), not
    // this run's leak. One whose anchor is gone must go within 5 s.
    const anchorAlive = (name: string): boolean => existsSync(`/proc/${/^cordon-(\d+)/.exec(name)![1]}`);
    let after = treeCgroups();
    const newSince = (): string[] => (after ? [...after.names].filter((n) => !before?.names.has(n) && !anchorAlive(n)) : []);
    for (const end = Date.now() + 5000; newSince().length > 0 && Date.now() < end; after = treeCgroups()) await sleep(100);
    const leaked = newSince();
    if (leaked.length > 0) {
      // Which tests were running when each appeared (test-log.ts).
      const made = (n: string): string => {
        const tests = testsThatSaw(n);
        return `${after!.dir}/${n} (appeared during: ${tests.length ? tests.join('; ') : 'no test'})`;
      };
      const named = leaked.map(made);
      for (const n of leaked) {
        try {
          rmdirSync(`${after!.dir}/${n}`);
        } catch {
          // not empty
        }
      }
      failRun(`the test run left cgroups behind:\n${named.join('\n')}`);
    }
  };
}
