// The whole run must leave zero processes behind: after every test file has
// finished, no process may still carry a tag of this run. Leaks are SIGKILLed
// by pid and fail the run. Tags start with a per-run id, so two runs on one
// machine never touch each other's processes.
import { describeProcs, findTagged, killPids, RUN_VAR } from './procs.js';

export default function setup() {
  process.env[RUN_VAR] ??= `r${process.pid}${Math.random().toString(36).slice(2, 6)}`;
  return () => {
    const left = findTagged();
    if (left.length > 0) {
      killPids(left.map((p) => p.pid));
      throw new Error(`the test run left processes behind (now SIGKILLed):\n${describeProcs(left)}`);
    }
  };
}
