// CONTRACT C2, C3: escapees the process-group tier (the macOS strategy) once
// missed, run in every tier (the cgroup and subreaper tiers, which catch every
// escapee, must end them too):
//   - a setsid hopper: fork, the parent exits, the child setsid()s, keeping
//     its environment, every ~2 ms. A sweep that lists and then kills chases
//     the next pid; the tier stops what it finds before it kills.
//   - a forker outside the group with an empty environment (only lineage
//     makes it and its children members) that ignores the polite signals:
//     the forced stop stops it before it kills it, or the children it forked
//     since the last walk, orphaned, run on out of sight.
//   - a member of another user (runuser -u nobody; the `uid` option): the
//     sweep of a root anchor reads every user's processes.
// Observed from outside: the hopper's heartbeat file stops growing and no
// tagged process is alive (several walks: one walk can miss a hopper); the
// other-user sleeper's printed pid is gone, and the result names it.
// The hopper is also stopped where no call of the host's awaits the end:
// the host SIGKILLed, a lease run out, an owner released.
//   - a marked process on the recycled pid of a process older than the tree,
//     or of one a sweep found to be no member: the anchor's walks skip both
//     by their /proc entry once read, so a new process on such a pid must be
//     read again.
import { spawn as spawnChild, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, onTestFinished } from 'vitest';
import { Registry, spawn, type ContainedProcess } from '../lib/index.js';
import { capture } from './helpers/fixtures.js';
import { fixtureProgram } from './helpers/compiled.js';
import { beatsAfter, hopperDir, hopperFile, silentFor, size, taggedByWalks, taggedSeen } from './helpers/hopper.js';
import { ensureDist, startHost } from './helpers/host.js';
import { hostEnded, killHost, spawnLeased, useRuntime } from './helpers/lease.js';
import { occupyFreedPid, PidOutOfReachError } from './helpers/pids.js';
import { observer } from './helpers/observer.js';
import { alive, readStat, sameAlive, sleep, useTag, waitFor, waitGone, within, type Tagged } from './helpers/procs.js';
import { missing, runuserPath } from './helpers/requirements.js';
import { caps, itWhere, tier, xnu } from './helpers/tier.js';
import { watchdog } from './helpers/time.js';

const catchesMarked = caps.guarantees.catchesEscapees !== 'never';
const notCaught = `the ${caps.tier} tier does not catch escapees`;
// The hopper is the compiled fixture (a program of the suite's own, whose
// environment every platform lets the anchor read), and so are the
// bystanders (`cordon-fixture bystanders`: not Apple's perl, whose
// environment, and so their tag, macOS ps is not shown).
const hopperWhy = !catchesMarked ? notCaught : (missing('cc') ?? '');
const noCc = missing('cc') ?? '';

// The setsid hopper: test/fixtures/cordon-fixture.c's `hop --setsid`, a
// fork, the parent's exit and the child's setsid() every 2 ms, a byte to its
// file every 10 generations (the heartbeat). Its own off switch, so that a
// hopper the product fails to stop cannot burn the CPU for the rest of the
// run: every generation ends when `<file>.stop` exists, and after 120 s.
// On the model of XNU's process table each read is a round trip to its
// kernel, five or six times a /proc read here and more than ten times a
// Mac's (docs/xnu-model.md): there a generation lives eight times as long,
// so that a walk has the time to read the newest one that it has here.
const PAUSE_US = xnu && process.platform === 'linux' ? '16000' : '2000';
const HOP = ['hop', '--setsid', '--pause-us', PAUSE_US] as const;
/** The hopper's command line for `sh -c` ("$1": the program, "$2": its file). */
const HOP_SH = `"$1" hop "$2" --setsid --pause-us ${PAUSE_US}`;

// Bystanders: idle processes started after the tree (so a sweep reads each
// one), as on a busy host. They make a walk take long enough that a hopper
// is another pid by the time a list-then-act sweep reaches it (without them
// an idle machine's walk is quick enough to hide the difference). Their own
// tag, so their cleanup is theirs and the test's walks do not see them.
// On the model of XNU's process table (the darwin build, test/xnu-model)
// each read of a process is a round trip to the model's kernel, about 60 us,
// five or six times a /proc stat read here (docs/xnu-model.md): a quarter of
// them make a walk about as long.
// The bystanders are the compiled fixture, whose environment the anchor reads
// (Apple's perl, before, it could not): on the model each such read is another
// round trip to its kernel, so there a quarter of the quarter.
const BYSTANDERS = xnu && process.platform === 'linux' ? 25 : 400;

async function bystanders(): Promise<void> {
  const b = useTag();
  // A process group of their own (detached), ended with one signal to it.
  const child = spawnChild(fixtureProgram(), ['bystanders', String(BYSTANDERS)], { env: b.env, stdio: ['ignore', 'pipe', 'ignore'], detached: true });
  onTestFinished(async () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone already
    }
    await waitGone(b, watchdog(10_000), 'the bystanders to be gone');
  });
  const out = capture(child.stdout);
  await out.until(/^up$/m, watchdog(20_000));
}

type Stop = 'terminate()' | 'kill()' | 'an AbortSignal';

async function hopperRound(how: Stop): Promise<void> {
  const t = useTag();
  const dir = hopperDir('cordon-escapes-');
  const file = hopperFile(dir, 'hop');
  const ac = new AbortController();
  // terminate() and kill() stop kept leftovers (the root, the hopper's first
  // generation, exits at its first hop); an AbortSignal stops a running root,
  // so there the root is a shell that started the hopper and sleeps.
  const prog = fixtureProgram();
  const [command, args] = how === 'an AbortSignal' ? ['sh', ['-c', `${HOP_SH} & exec sleep 1000`, 'sh', prog, file]] : [prog, [HOP[0], file, ...HOP.slice(1)]];
  const proc: ContainedProcess = spawn(command, args, {
    env: t.env,
    leftovers: 'keep',
    stdio: ['ignore', 'ignore', 'ignore'],
    ...(how === 'an AbortSignal' ? { signal: ac.signal } : {}),
  });
  proc.result.catch(() => undefined);
  await within(proc.started, watchdog(10_000), 'the hopper to start', t.tag);
  // Only where stopping walks the host's processes do bystanders change what
  // the anchor does (the cgroup and subreaper tiers read the tree alone).
  await hopping(t, file);
  const stopped = how === 'terminate()' ? proc.terminate({ grace: 500 }) : how === 'kill()' ? proc.kill() : (ac.abort(), proc.result.then(() => undefined, () => undefined));
  // The bound: the grace, then the forced stop's freeze rounds (1 s each at the most) on a loaded machine.
  await within(stopped, watchdog(15_000), `${how} to resolve`, t.tag);
  await expectStopped(t, file, `${how} resolved`);
}

/** The hopper's heartbeat no longer grows and no walk finds a tagged process. */
async function expectStopped(t: Tagged, file: string, after: string): Promise<void> {
  const at = size(file);
  await sleep(500);
  expect(size(file), `the hopper still hops after ${after}`).toBe(at);
  expect(taggedByWalks(t), `tagged processes after ${after}`).toBe('(none)');
}

/**
 * Ends where no promise of the host's resolves (the host is gone): waits,
 * bounded, until 20 walks that send no signal (taggedSeen) find nothing
 * tagged (a check that stops and kills would do the anchor's work), then
 * checks as above (the freeze check, and the heartbeat).
 */
async function expectStoppedWithoutHost(t: Tagged, file: string, after: string, timeout: number): Promise<void> {
  await waitFor(() => taggedSeen(t) === '(none)', { timeout, what: `nothing tagged to be left after ${after}`, watch: t.tag });
  await expectStopped(t, file, after);
}

/** A hopper's heartbeat file and the environment that hands it and the program to a host fixture. */
function hopperFor(t: Tagged, env: NodeJS.ProcessEnv = t.env): { file: string; env: NodeJS.ProcessEnv } {
  const file = hopperFile(hopperDir('cordon-escapes-'), 'hop');
  return { file, env: { ...env, HOPPER_PROG: fixtureProgram(), HOPPER_FILE: file, HOPPER_PAUSE_US: PAUSE_US } };
}

/** Waits until the hopper has hopped 30 times (with bystanders first where stopping walks the host). */
async function hopping(t: Tagged, file: string): Promise<void> {
  if (!caps.guarantees.stopCostIsTheTree) await bystanders();
  // A hop is a fork and a 2 ms sleep; a loaded 2-core machine can be ten times slower: 30 s for 30 hops.
  await waitFor(() => size(file) >= 3, { timeout: watchdog(30_000), what: 'the hopper to hop 30 times', watch: t.tag });
}

/**
 * The forced stop's own proof: a setsid hopper that ignores every polite
 * signal (SIGTERM, SIGHUP, SIGINT: `--ignore-polite`) and beats every
 * generation (`--every 1`), so the grace ends nothing and only the forced
 * stop (in the process-group tier: freeze the members outside the group,
 * then kill them) can. Right after terminate() or kill() resolves, with no
 * grace for the test, the freeze check (taggedByWalks: killTagged) must find
 * nothing tagged alive.
 */
/**
 * One round of an unpaced setsid hopper stopped by `how`. `dies`: it dies of
 * the polite signal (its generations are ended by the polite phase's walks and
 * quiescence is what the tier decides, with a 10 s grace the forced stop is
 * rarely reached), else it ignores every polite signal (a 300 ms grace: the
 * forced stop does the work).
 */
async function forcedRound(how: 'terminate()' | 'kill()', round: number, dies = false): Promise<void> {
  const t = useTag();
  const file = hopperFile(hopperDir('cordon-escapes-'), 'hop');
  // No pause between generations: it forks as fast as the machine lets it,
  // faster than a walk of every process (with the bystanders) reads them.
  // On the model of XNU, where every read is a round trip to the model's
  // kernel, the pause the other hoppers take there (PAUSE_US, above): its
  // kernel lists a fork at once, but a walk there is several times a Mac's.
  // One that dies of the polite signal pauses 2 ms there (as the paced hoppers
  // on Linux): a generation then lives shorter than a walk of the model's, so
  // walks list generations gone by the time they are read, and must not take
  // quiescence from one of those.
  const pause = xnu && process.platform === 'linux' ? ['--pause-us', dies ? '2000' : PAUSE_US] : [];
  const proc: ContainedProcess = spawn(fixtureProgram(), ['hop', file, '--setsid', ...(dies ? [] : ['--ignore-polite']), '--every', '1', ...pause], {
    env: t.env,
    leftovers: 'keep',
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  proc.result.catch(() => undefined);
  await within(proc.started, watchdog(10_000), 'the hopper to start', t.tag);
  if (!caps.guarantees.stopCostIsTheTree) await bystanders();
  const before = await beatsAfter(file, 0, 30, `round ${round}`, t);
  // A short grace where the hopper ignores the polite signal: the forced stop does the work.
  const grace = dies ? 10_000 : 300;
  const stopped = how === 'terminate()' ? proc.terminate({ grace }) : proc.kill();
  // The bound: the grace, then the forced stop's freeze rounds (1 s each at the most) on a loaded machine.
  await within(stopped, watchdog(grace + 15_000), `round ${round}: ${how} to resolve`, t.tag);
  expect(taggedByWalks(t), `round ${round}: tagged processes alive when ${how} resolved (heartbeat at ${before} before it)`).toBe('(none)');
  expect(await silentFor(file, 400), `round ${round}: the heartbeat still grows after ${how} resolved`).toBe(true);
}

// On the model of XNU this found the darwin sweep declaring the tree quiescent
// after one walk that listed a generation, read it only after it had forked
// and exited, and never listed its child (docs/xnu-model.md, "The forced stop
// and a pid hopper"); a walk now lists again when that happens.
describe('C2/C3: the forced stop ends a setsid hopper that ignores the polite signals', () => {
  for (const how of ['terminate()', 'kill()'] as const) {
    // proves C3, C2
    itWhere(hopperWhy === '', `by ${how}${how === 'terminate()' ? ' with a 300 ms grace' : ''}: nothing tagged is alive when it resolves (3 rounds)`, hopperWhy, async () => {
      for (let round = 1; round <= 3; round++) await forcedRound(how, round);
    }, watchdog(150_000));
  }
});

// The same hopper dying of the polite signal: each generation a walk finds
// gets SIGTERM and dies, but one forked before it did goes on, and when the
// tree is quiescent is the walks' word (in the process-group tier: the
// sweep's, once the group is empty). A walk that listed a generation and read
// it only once it had forked and exited may have missed its child: such a
// walk proves nothing, and one that found nothing must be settled to end the
// stop (quiescence from one walk, settled or not, resolved with the hopper
// alive). The forced stop comes only after 10 s.
describe('C2/C3: the polite stop ends a setsid hopper that dies of it, forking as fast as it can', () => {
  // proves C3, C2
  itWhere(hopperWhy === '', 'terminate() with a 10 s grace: nothing tagged is alive when it resolves (5 rounds)', hopperWhy, async () => {
    for (let round = 1; round <= 5; round++) await forcedRound('terminate()', round, true);
  }, watchdog(200_000));
});

// A member in its exit: its memory, and so its environment, already gone,
// not yet a zombie (its files not yet closed). A walk that reads it then
// cannot tell whether it is the tree's: it is no member only once gone. So
// the walk proves nothing of it (nor, on macOS, of a child it forked after
// the walk's listing: the polite hopper above, on the model of XNU, once
// ended with a generation alive, its parent read this way). On XNU such a
// process reads PROC_FLAG_INEXIT and kern.procargs2 answers EINVAL
// (docs/xnu-model.md); on Linux its environ cannot be read and its stat flags
// say PF_EXITING. The fixture (cordon-fixture heavy-exit) makes the exit
// long: its member frees 512 MiB of small pages (40 ms or more), and the
// root ends 10 ms after the member began to exit, so the anchor's walk at the
// root's exit reads it in its exit. The member's parent exits at once (no
// walk sees it: on macOS no lineage ties the member to the tree, only its
// environment). The member is forked 100 ms after the root and lives a few
// hundred milliseconds: in the process-group tier no look at the tree while
// it runs (the first as it starts, then one a second) sees it alive, which
// would make it a member known by its pid, and waited for. Observed from
// outside: the member's pid, which it writes before its exit, is gone or a
// zombie when the result resolves (the cgroup and subreaper tiers wait for it
// as a member of the cgroup, or as a child of the anchor).
describe('C2: a member in its exit when the root exits', () => {
  // proves C2
  itWhere(hopperWhy === '', 'the result resolves only once it is gone (3 rounds)', hopperWhy, async () => {
    for (let round = 1; round <= 3; round++) {
      const t = useTag();
      const file = join(hopperDir('cordon-heavy-exit-'), 'pids');
      const proc: ContainedProcess = spawn(fixtureProgram(), ['heavy-exit', file, '512', '100'], { env: t.env, stdio: ['ignore', 'ignore', 'ignore'] });
      proc.result.catch(() => undefined);
      // Writing 512 MiB and freeing it: well under a second on an idle machine.
      await within(proc.result, watchdog(60_000), `round ${round}: the result`, t.tag);
      const pid = Number(readFileSync(file, 'utf8').trim());
      const st = readStat(pid);
      expect(st === undefined || st.state === 'Z' || st.state === 'X', `round ${round}: the member ${pid} still in its exit (${st?.state}) when the result resolved`).toBe(true);
    }
  }, watchdog(120_000));
});

// A forker outside the group (setsid), with an empty environment (nothing
// marks it or its children: only lineage makes them members), that ignores
// the polite signals and keeps 32 children alive, each for 8 ms: at any
// moment some of its children are younger than the anchor's last walk. Killed
// before it is stopped, it orphans them: out of the group, unmarked and no
// longer below a member, they are out of the tier's sight. The forced stop
// stops it first (SIGSTOP), so its children keep their parent until the walk
// finds them. A child that finds itself orphaned while it lives writes its
// pid to <file>.orphans and stays (cordon-fixture forkring). In the cgroup
// and subreaper tiers the orphans are still the tree's (the subreaper tier
// takes them in): they are ended all the same. But the subreaper tier's
// forced stop freezes first as well (a kill that chases a forking tree once
// left a hopper alive 5 s into it), so there, as in the process-group tier,
// no child may see its forker die at all: every member is stopped before
// any is killed, and none runs between another's SIGKILL and its own. (The
// cgroup tier's forced kill is one cgroup.kill write where the kernel has
// it, and on cgroup v1 a SIGKILL per member: no freeze is promised there.)
//
// A SIGSTOP takes effect as the forker leaves the kernel: a fork it was in
// when the signal came completes first, with a child no walk made meanwhile
// listed (seen on Linux: children appear after kill() returned, until the
// forker shows T). So each walk of the freeze begins once what was stopped
// holds still (await_still). The second forker writes a heap first, whose
// page tables each of its forks copies: its forks are slow, and a SIGSTOP
// comes in the middle of one most times (the anchor's trace says "held still
// after" a few looks, and the next walk finds the child that fork made).
describe('C2/C3: the forced stop freezes before it kills: a forker outside the group with no marker leaves no orphan', () => {
  const ROUNDS = 5;
  const forkers = [
    { what: '', args: '' },
    { what: ', its forks slow (a 64 MiB heap)', args: ' --heap-mb 64' },
  ];
  for (const forker of forkers) {
    // proves C3, C2
    itWhere(hopperWhy === '', `terminate() with a 300 ms grace: no orphaned child of the forker${forker.what} outlives it (${ROUNDS} rounds)`, hopperWhy, async () => {
      for (let round = 1; round <= ROUNDS; round++) {
        const t = useTag();
        const dir = hopperDir('cordon-forkring-');
        const file = hopperFile(dir, 'ring');
        // Its pids, read from the file, are the only way to find an orphan (it
        // carries no tag): each one left alive is SIGKILLed by pid if it still
        // runs the fixture (the stop file, made by hopperFile's cleanup, ends
        // it too).
        onTestFinished(() => {
          for (const pid of orphansOf(file)) if (observer.cmdline(pid).includes(file)) killQuietly(pid);
        });
        const proc = spawn('sh', ['-c', `trap "" TERM HUP INT; env -i "$1" forkring "$2" --setsid --children 32 --child-ms 8 --lifetime 60${forker.args} & wait`, 'sh', fixtureProgram(), file], {
          env: t.env,
          stdio: ['ignore', 'ignore', 'ignore'],
        });
        proc.result.catch(() => undefined);
        await within(proc.started, watchdog(10_000), 'the root to start', t.tag);
        await beatsAfter(file, 0, 200, `round ${round}: the forker to run`, t);
        await within(proc.terminate({ grace: 300 }), watchdog(15_000), `round ${round}: terminate() to resolve`, t.tag);
        const at = size(file);
        await sleep(300);
        expect(size(file), `round ${round}: the forker still forks after terminate() resolved`).toBe(at);
        const left = orphansOf(file).filter((pid) => observer.cmdline(pid).includes(file));
        expect(left, `round ${round}: orphaned children of the forker alive after terminate() resolved (${orphansOf(file).length} orphaned in all)`).toEqual([]);
        if (tier !== 'cgroup') expect(orphansOf(file), `round ${round}: children that saw the forker die before they were stopped`).toEqual([]);
        expect(taggedByWalks(t), `round ${round}: tagged processes after terminate() resolved`).toBe('(none)');
        writeFileSync(`${file}.stop`, '');
      }
    }, watchdog(150_000));
  }
});

/** The pids a forkring's orphaned children wrote to `<file>.orphans`. */
function orphansOf(file: string): number[] {
  let text = '';
  try {
    text = readFileSync(`${file}.orphans`, 'utf8');
  } catch {
    return [];
  }
  return text.split('\n').filter(Boolean).map(Number);
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone
  }
}

describe('C2/C3: a setsid hopper is stopped', () => {
  for (const how of ['terminate()', 'kill()', 'an AbortSignal'] as const) {
    // proves C3
    itWhere(hopperWhy === '', `by ${how}: its heartbeat stops and nothing tagged is left (2 rounds)`, hopperWhy, async () => {
      for (let round = 0; round < 2; round++) await hopperRound(how);
    }, watchdog(150_000));
  }
});

// The ways a tree ends that no call of the host's awaits: the host's death
// (the anchor alone stops the tree), a lease that runs out (the anchor, with
// no host attached), an owner's release (every tree of the owner at once).
describe('C2/C3/C8: a setsid hopper ends with its host, its lease and its owner', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  // proves C8
  itWhere(hopperWhy === '', 'the host SIGKILLed: the anchor alone stops the hopper; its heartbeat stops and nothing tagged is left', hopperWhy, async () => {
    const t = useTag();
    const { file, env } = hopperFor(t);
    const host = startHost(['wait', '--trees', 'hopper'], env);
    hostEnded(host);
    await host.ready();
    await hopping(t, file);
    await killHost(host, t);
    // C8's 1 s, the grace (cordon's default, 2 s: the hopper ignores nothing,
    // but the forced stop is what a hopper needs) and freeze rounds on a loaded machine.
    await expectStoppedWithoutHost(t, file, 'the host was SIGKILLed', watchdog(15_000));
  }, watchdog(90_000));

  // proves C8
  itWhere(hopperWhy === '', 'a lease that runs out with no host attached: the hopper stops and nothing tagged is left', hopperWhy, async () => {
    const t = useTag();
    const { env: runtimeEnv } = useRuntime(t);
    const { file, env } = hopperFor(t, runtimeEnv);
    const leased = await spawnLeased(env, 2000, 500, `"$HOPPER_PROG" hop "$HOPPER_FILE" --setsid --pause-us ${PAUSE_US} & echo READY; exec sleep 300`);
    await hopping(t, file);
    await killHost(leased.host, t);
    // The hopper runs on while the lease does (2 s from the host's death).
    const during = size(file);
    await sleep(1000);
    expect(size(file), 'the leased hopper runs on while its lease does').toBeGreaterThan(during);
    await expectStoppedWithoutHost(t, file, 'the lease ran out', watchdog(20_000));
  }, watchdog(90_000));

  // proves C8
  itWhere(hopperWhy === '', "an owner's release(): the hopper stops and nothing tagged is left", hopperWhy, async () => {
    const t = useTag();
    const file = hopperFile(hopperDir('cordon-escapes-'), 'hop');
    const owner = new Registry().owner(`hopper-${process.pid}`);
    const proc = owner.spawn('sh', ['-c', `${HOP_SH} & exec sleep 1000`, 'sh', fixtureProgram(), file], { env: t.env, stdio: ['ignore', 'ignore', 'ignore'] });
    proc.result.catch(() => undefined);
    await within(proc.started, watchdog(10_000), 'the hopper to start', t.tag);
    await hopping(t, file);
    await within(owner.release({ grace: 500 }), watchdog(15_000), 'release() to resolve', t.tag);
    await expectStopped(t, file, 'release() resolved');
  }, watchdog(90_000));
});

const isRoot = process.getuid?.() === 0;
/** Why a member of another user cannot be started here ('' where it can). */
function otherUserWhy(...needs: Parameters<typeof missing>): string {
  if (!catchesMarked) return 'tier does not catch escapees';
  if (!isRoot) return 'needs a root test runner to start a member as another user';
  return missing('nobody', 'cc', ...needs) ?? '';
}
const runuserWhy = otherUserWhy('runuser');
const uidWhy = otherUserWhy();

// The escapee runs the compiled fixture's setsid and sleep (programs of the
// suite's own): their environment, with the marker, is readable to a root
// anchor on every platform (macOS withholds that of its own system programs:
// the darwin model's tests cover those, test/xnu-model).
const ESCAPE_SH = `"$1" setsid -f sh -c 'echo "PID s $$"; exec "$0" sleep 1009' "$1"`;

describe('C2: a member of another user is caught', () => {
  // proves C5
  itWhere(runuserWhy === '', 'runuser -u nobody -- setsid -f sleep: named in leftovers and gone', runuserWhy, async () => {
    const t = useTag();
    const script = `${runuserPath()} -u nobody -- ${ESCAPE_SH}; sleep 0.5`;
    const proc = spawn('sh', ['-c', script, 'sh', fixtureProgram()], { env: t.env, cwd: tmpdir(), stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    const result = await within(proc.result, watchdog(15_000), 'the result', t.tag);
    const s = out.pids().s!;
    expect(s, out.text).toBeGreaterThan(0);
    expect(result.leftovers.map((l) => l.pid), JSON.stringify(result.leftovers)).toContain(s);
    await waitFor(() => !alive(s), { timeout: watchdog(5000), what: `nobody's sleeper ${s} to be gone`, watch: t.tag });
  });

  // proves C5
  itWhere(uidWhy === '', "the uid option: setsid -f sleep as nobody is named in leftovers and gone", uidWhy, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', `${ESCAPE_SH}; sleep 0.5; exit 0`, 'sh', fixtureProgram()], { env: t.env, uid: 65534, gid: 65534, cwd: tmpdir(), stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    const result = await within(proc.result, watchdog(15_000), 'the result', t.tag);
    const s = out.pids().s!;
    expect(s, out.text).toBeGreaterThan(0);
    expect(result.leftovers.map((l) => l.pid), JSON.stringify(result.leftovers)).toContain(s);
    await waitFor(() => !alive(s), { timeout: watchdog(5000), what: `nobody's sleeper ${s} to be gone`, watch: t.tag });
  });
});

// The marker's reading: the tree's CORDON_TREE as a member's environment has it.
// Read through the observer (/proc, or ps -E on macOS), as every other reading here.
function markerOf(pid: number): string | undefined {
  return observer.environ(pid)?.find((e) => e.startsWith('CORDON_TREE='))?.slice('CORDON_TREE='.length);
}

const reuseWhy =
  caps.guarantees.catchesEscapees !== 'marked'
    ? `the ${caps.tier} tier has no marker (catchesEscapees ${JSON.stringify(caps.guarantees.catchesEscapees)})`
    : process.platform !== 'linux'
      ? "a pid's reuse after the sweep skipped its entry is Linux's mechanism (macOS skips by unique id: test/xnu-model)"
      : '';

/** A tree and the pid of a process it skips by its /proc entry, now killed and reaped. */
type Skipped = { proc: ContainedProcess; leavers: number[]; target: number };

// The tree's marker is written to `tokenFile` by `scenario`, which makes the
// tree (its leftGroup events collected) and a process the anchor's walks skip,
// then frees that process's pid. A process that carries the marker takes the
// pid (helpers/pids.ts; where another process takes it first, the scenario
// starts over). The tier must find it, end it and name it: the anchor knows
// the skipped process by its /proc entry, not by its pid.
async function markedOnSkippedPid(t: Tagged, ctx: { skip: (why: string) => void }, scenario: (tokenFile: string) => Promise<Skipped>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-reuse-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  const tokenFile = join(dir, 'token');
  let setup: { scenario: Skipped; occ: { pid: number; start: string } };
  try {
    setup = await occupyFreedPid({
      setup: async () => {
        const s = await scenario(tokenFile);
        return { scenario: s, target: s.target };
      },
      teardown: (s) => within(s.proc.kill(), watchdog(10_000), 'kill() of a tree whose freed pid another process took', t.tag).then(() => undefined),
      // The occupant carries the marker from its exec (its environment is
      // made when it is spawned, once the token is known) and stays out of
      // the tree's group. (Through `sh -c 'CORDON_TREE=$(cat …) exec sleep'`
      // it ran markerless for a few ms, the shell's start: a sweep that read
      // it then took it for what it was, a process no member started, and
      // skipped it by its /proc entry, which its exec does not change. What
      // remains is Node's fork-to-exec, microseconds: a real escapee has the
      // marker from its fork.)
      env: withMarkerFrom(t.env, tokenFile),
      command: ['sleep', '300'],
      timeout: watchdog(40_000),
    });
  } catch (err) {
    if (!(err instanceof PidOutOfReachError)) throw err;
    console.log(`skipped: ${err.message}`);
    ctx.skip(err.message);
    return;
  }
  const { scenario: tree, occ } = setup;
  await waitFor(() => markerOf(occ.pid) !== undefined, { timeout: watchdog(5000), what: `the occupant ${occ.pid} to carry the marker`, watch: [occ.pid] });
  // A walk first probes the newest pids one by one (the last 64 handed out):
  // 100 forks put the occupant behind them, where the walk goes by the
  // directory's listing, which is what skips by entry.
  const forks = spawnSync('sh', ['-c', 'i=0; while [ $i -lt 100 ]; do /bin/true; i=$((i+1)); done'], { stdio: 'ignore', timeout: watchdog(30_000) });
  expect(forks.status, 'the 100 forks').toBe(0);
  await within(tree.proc.terminate(), watchdog(15_000), 'terminate()', t.tag);
  expect(sameAlive(occ.pid, occ.start), `the marked process on the old pid ${occ.pid}`).toBe(false);
  expect(tree.leavers, "the tree's leftGroup events").toContain(occ.pid);
}

/** `env` and CORDON_TREE, read from `tokenFile` when the environment is read (at the spawn, once the tree wrote it). */
function withMarkerFrom(env: NodeJS.ProcessEnv, tokenFile: string): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  Object.defineProperty(out, 'CORDON_TREE', { enumerable: true, get: () => readFileSync(tokenFile, 'utf8').trim() });
  return out;
}

/** A tree of `command` (the root prints "PID root"), killed when the test ends; its marker written to `tokenFile`. */
async function markedTree(t: Tagged, tokenFile: string, command: string, opts: { leftovers?: 'keep'; stdin?: 'pipe' } = {}) {
  const proc = spawn('sh', ['-c', command], { env: t.env, ...(opts.leftovers ? { leftovers: opts.leftovers } : {}), stdio: [opts.stdin ?? 'ignore', 'pipe', 'ignore'] });
  proc.result.catch(() => undefined);
  // (A kept tree's result is settled early: what the tier finds later, it says in events.)
  const leavers: number[] = [];
  proc.on('leftGroup', (l) => leavers.push(l.pid));
  onTestFinished(() => within(proc.kill(), watchdog(10_000), 'kill() of the tree', t.tag).then(() => undefined));
  const out = capture(proc.stdout);
  await out.until(/^PID root \d+$/m, watchdog(10_000));
  const writeToken = () => {
    const token = markerOf(out.pids().root!);
    expect(token, 'CORDON_TREE of the root').toBeTruthy();
    writeFileSync(tokenFile, token!);
  };
  return { proc, leavers, writeToken };
}

/** A sleep of the test's own, killed when the test ends; resolves once it runs. */
async function sleeper(t: Tagged): Promise<{ child: ChildProcess; end: () => Promise<void> }> {
  const child = spawnChild('sleep', ['300'], { env: t.env, stdio: 'ignore' });
  onTestFinished(() => void child.kill('SIGKILL')); // (Node's handle: never a reaped, recycled pid)
  await new Promise((resolve, reject) => child.once('spawn', resolve).once('error', reject));
  const end = async () => {
    child.kill('SIGKILL');
    await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(undefined) : child.once('exit', resolve)));
  };
  return { child, end };
}

describe('C2: a marked process on the recycled pid of a process older than the tree', () => {
  // A process started before the tree: the anchor's first snapshot reads it
  // and finds it older, and its walks skip it from then on.
  // proves C2
  itWhere(reuseWhy === '', 'is found by the sweep, ended and named', reuseWhy, async (ctx) => {
    const t = useTag();
    await markedOnSkippedPid(t, ctx, async (tokenFile) => {
      const old = await sleeper(t);
      // Start times count clock ticks (10 ms here): older by a few.
      await sleep(50);
      const tree = await markedTree(t, tokenFile, 'echo "PID root $$"; exec sleep 300');
      // The anchor's snapshots walk every process in the tree's first
      // seconds (the first one within a second): it has read the old one.
      await sleep(1500);
      tree.writeToken();
      await old.end();
      return { proc: tree.proc, leavers: tree.leavers, target: old.child.pid! };
    });
  }, watchdog(90_000));
});

describe('C2: a marked process on the recycled pid of a process a sweep found to be no member', () => {
  // A process started after the tree without its marker, read by the sweep
  // at the root's exit (its environment whole, without the token; its parent,
  // this test's process, older than the anchor): the anchor's walks skip it
  // from then on. The tree lives on after its root: a sleeper kept in its group.
  // proves C2
  itWhere(reuseWhy === '', 'is found by the sweep, ended and named', reuseWhy, async (ctx) => {
    const t = useTag();
    await markedOnSkippedPid(t, ctx, async (tokenFile) => {
      const tree = await markedTree(t, tokenFile, 'sleep 300 & echo "PID root $$"; read go; exit 0', { leftovers: 'keep', stdin: 'pipe' });
      tree.writeToken();
      const other = await sleeper(t);
      // The 'leftovers' event comes once the anchor's root-exit sweep is over.
      const swept = new Promise((resolve) => tree.proc.once('leftovers', resolve));
      tree.proc.stdin!.end('go\n');
      await within(swept, watchdog(10_000), "the root's exit and its sweep", t.tag);
      await other.end();
      return { proc: tree.proc, leavers: tree.leavers, target: other.child.pid! };
    });
  }, watchdog(90_000));
});

describe('C3: a marked member outside the group, while the tree runs', () => {
  // Linux: a sweep precedes each snapshot (every second in a tree's first
  // seconds), so an escapee that keeps the marker is named while the tree
  // runs, not only when it is stopped. A setsid -f child is orphaned at once:
  // no snapshot sees it as a descendant.
  // proves C11, C3
  itWhere(reuseWhy === '' && noCc === '', 'is named by a leftGroup event before any stop, then ended with the tree', reuseWhy || noCc, async () => {
    const t = useTag();
    // The compiled fixture's setsid and sleep: a marker every platform lets the anchor read.
    const script = `"$1" setsid -f sh -c 'echo "PID s $$"; exec "$0" sleep 307' "$1"; exec sleep 300`;
    const proc = spawn('sh', ['-c', script, 'sh', fixtureProgram()], { env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
    proc.result.catch(() => undefined);
    onTestFinished(() => within(proc.kill(), watchdog(10_000), 'kill() of the tree', t.tag).then(() => undefined));
    const leavers: number[] = [];
    proc.on('leftGroup', (l) => leavers.push(l.pid));
    const out = capture(proc.stdout);
    await out.until(/^PID s \d+$/m, watchdog(10_000));
    const s = out.pids().s!;
    // A sweep comes every second in the tree's first 5 s; after that, while
    // no member is known outside the group, at 2, 4, then at most 8 s apart
    // (a machine so loaded that the escapee starts late). The rest of the
    // 15 s is for the load.
    await waitFor(() => leavers.includes(s), { timeout: watchdog(15_000), what: `a leftGroup event naming ${s}`, watch: t.tag });
    expect(proc.rootExited, 'the root still runs').toBe(false);
    await within(proc.terminate(), watchdog(15_000), 'terminate()', t.tag);
    await waitGone(t, watchdog(5000), 'the tree and its escapee to be gone');
  });
});
