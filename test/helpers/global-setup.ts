// The whole run must leave zero processes behind: after every test file has
// finished, no process may still carry a test tag. Leaks are SIGKILLed by pid
// and fail the run.
import { describeProcs, findTagged, killPids } from './procs.js';

export default function setup() {
  return () => {
    const left = findTagged();
    if (left.length > 0) {
      killPids(left.map((p) => p.pid));
      throw new Error(`the test run left processes behind (now SIGKILLed):\n${describeProcs(left)}`);
    }
  };
}
