// The trees every library is asked to stop. Each is a `sh -c` script that
// prints READY once its tree exists. Every process inherits the bench tag.
//
// trigger:
//   'cancel'     t0 = the library's stop call, right after READY
//   'root-exit'  no stop call: t0 = the moment the root is seen dead in /proc;
//                what does the library do by itself?
//   'host-kill'  a tiny host (bench/host.mjs) runs the tree with the library
//                and is SIGKILLed at t0; nothing of the host can react
import { existsSync } from 'node:fs';

export const TREE = 'sleep 300 & sh -c "sleep 300 & wait" & echo READY; wait';

const STORM_FORKERS = 4;
const STORM_PER_FORKER = 50;

export const scenarios = [
  {
    id: 'tree',
    title: 'a tree',
    detail: 'root sh, a background sleep, a child sh with its own sleep (4 processes, 3 generations, one group)',
    script: TREE,
    trigger: 'cancel',
  },
  {
    id: 'setsid',
    title: 'a setsid escapee',
    detail: 'root sh waits on a child that called setsid(2) (new session and group) and says READY from there',
    // READY comes from the escapee, after setsid(): no race with the stop call.
    script: "setsid sh -c 'echo READY; exec sleep 300 >/dev/null 2>&1' & wait",
    trigger: 'cancel',
  },
  {
    id: 'double-fork',
    title: 'a double fork',
    detail: 'a grandchild orphaned at once by its parent (reparented away from the root); the root keeps running',
    script: '(sleep 300 >/dev/null 2>&1 &); echo READY; exec sleep 300',
    trigger: 'cancel',
  },
  {
    id: 'holds-stdout',
    title: 'root exits, grandchild holds stdout',
    detail: 'the root exits 0.2 s after READY; an orphaned grandchild keeps the stdout pipe open (no stop call)',
    script: '(sleep 300 &); echo READY; sleep 0.2',
    trigger: 'root-exit',
  },
  {
    id: 'ignores-term',
    title: 'a TERM-ignoring tree',
    detail: "trap '' TERM in the root: it and its 3 descendants ignore SIGTERM",
    script: `trap '' TERM; ${TREE}`,
    trigger: 'cancel',
  },
  {
    id: 'trap',
    title: 'a trap cleanup',
    detail: 'the root traps TERM, writes a marker file, stops its child and exits 0 (did the trap run?)',
    script: 'trap \'echo cleaned > "$BENCH_MARK"; kill $c 2>/dev/null; exit 0\' TERM; sleep 300 & c=$!; echo READY; wait',
    trigger: 'cancel',
    mark: true,
    note: (env) => (existsSync(env.BENCH_MARK) ? 'trap ran' : 'trap did not run'),
  },
  {
    id: 'fork-storm',
    title: 'a fork storm',
    detail: `${STORM_FORKERS} escaped forker loops each double-forking up to ${STORM_PER_FORKER} sleepers as fast as they can; stopped mid-storm`,
    script:
      `storm() { i=0; while [ $i -lt ${STORM_PER_FORKER} ]; do (sleep 300 >/dev/null 2>&1 &); i=$((i+1)); done; }; ` +
      `for k in $(seq ${STORM_FORKERS}); do (storm </dev/null >/dev/null 2>&1 &); done; echo READY; exec sleep 300`,
    trigger: 'cancel',
  },
  {
    id: 'host-sigkill',
    title: 'host SIGKILLed',
    detail: 'a host process (bench/host.mjs) runs the tree with the library and is killed with SIGKILL',
    script: TREE,
    trigger: 'host-kill',
  },
  {
    id: 'concurrent-50',
    title: '50 trees cancelled at once',
    detail: '50 copies of the tree, all stopped in one loop; settled = the last of the 50',
    script: TREE,
    trigger: 'cancel',
    count: 50,
  },
];
