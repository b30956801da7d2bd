// The model of XNU's process table (test/xnu-model/kernel.cc) is what the
// darwin build is tested on (.ci/darwin-model.sh): each rule it keeps,
// checked against real processes here, with the XNU source it follows
// (docs/xnu-model.md). A rule turned off in the model (CORDON_XNU_MUTATE, the
// kernel's --mutate) fails the test of that rule:
//   exec-reset        "an orphan's exec takes launchd's unique id as its parent's ..."
//   exec-head         "an exec puts a process back at the head of the kernel's list"
//   orig-ppidversion  "a fork takes ... its parent's pid version" and the orphan's test
//   restrict          "the exec of a platform program restricts it ..."
//   in-exit           "a process in its exit reads as alive ..."
// The processes are the test's own (useTag: killed by tag when it ends).
import { spawn as spawnChild } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { posixBinding } from '../../lib/native.js';
import { capture } from '../helpers/fixtures.js';
import { fixtureProgram } from '../helpers/compiled.js';
import { alive, useTag, waitFor, waitGone } from '../helpers/procs.js';
import { watchdog } from '../helpers/time.js';
import { listAll, modelRelease, procargs2, record, shortInfo, type ModelRecord } from './client.js';

const from154 = modelRelease === '15.4';
const from13 = modelRelease !== '11';

async function must(pid: number): Promise<ModelRecord> {
  const r = await record(pid);
  expect(r, `the model's record of ${pid}`).toBeDefined();
  return r!;
}

/**
 * A shell script of the test's own, whose `PID <name> <pid>` lines are read as
 * they come; in a process group of its own (detached), which every process it
 * starts stays in, SIGKILLed as one when the test ends (registered after the
 * tag's check, so it runs first).
 */
function script(t: ReturnType<typeof useTag>, text: string) {
  const child = spawnChild('sh', ['-c', text], { env: t.env, stdio: ['ignore', 'pipe', 'ignore'], detached: true });
  onTestFinished(async () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone already
    }
    await waitGone(t, watchdog(5000), "the test's own processes to be gone");
  });
  return capture(child.stdout);
}

describe(`the model of XNU's process table (XNU ${modelRelease}'s rules)`, () => {
  // proves nothing of the contract: the model of XNU against real processes, not cordon
  it("a fork takes a unique id above every older one's, its parent's unique id, and (15.4) its parent's pid version", async () => {
    const t = useTag();
    // The subshell is a fork of the shell that does not exec.
    const out = script(t, 'echo "PID sh $$"; (sleep 30; :) & echo "PID sub $!"; wait');
    await out.until(/^PID sub \d+$/m);
    const { sh, sub } = out.pids();
    const parent = await must(sh!);
    const child = await must(sub!);
    expect(child.uniqueid).toBeGreaterThan(parent.uniqueid);
    expect(child.idversion).toBeGreaterThan(parent.idversion);
    expect(child.puniqueid, 'p_puniqueid: the parent at fork (kern_proc.c pinsertchild)').toBe(parent.uniqueid);
    expect(child.origPpidversion, 'p_orig_ppidversion (kern_fork.c, xnu-11417; reserved, 0, before)').toBe(from154 ? parent.idversion : 0);
    expect(child.restricted, 'CS_RESTRICT copied into the fork (kern_fork.c)').toBe(parent.restricted);
  });

  // proves nothing of the contract: the model of XNU against real processes, not cordon
  it("an orphan's exec takes launchd's unique id as its parent's (13+), and keeps its unique id, pid version and (15.4) its forker's", async () => {
    const t = useTag();
    // sub forks, its parent (the shell) exits at once; sub execs a second later.
    const out = script(t, 'echo "PID sh $$"; (sleep 1; exec sleep 30) & echo "PID sub $!"');
    await out.until(/^PID sub \d+$/m);
    const { sh, sub } = out.pids();
    const before = await must(sub!);
    const launchd = await must(1);
    await waitFor(() => !alive(sh!), { timeout: watchdog(5000), what: 'the shell to exit', watch: t.tag });
    let after = before;
    await waitFor(
      async () => {
        after = await must(sub!);
        return after.comm === 'sleep' && after.ppid === 1;
      },
      { timeout: watchdog(10_000), what: `${sub} to exec sleep, orphaned`, watch: t.tag },
    );
    expect(after.uniqueid, 'p_uniqueid kept across exec (kern_fork.c, in_exec)').toBe(before.uniqueid);
    expect(after.idversion, 'p_idversion kept across exec').toBe(before.idversion);
    expect(after.origPpidversion, 'p_orig_ppidversion kept across exec and reparenting').toBe(before.origPpidversion);
    if (from13) expect(after.puniqueid, "p_puniqueid reset at exec to the parent's now: launchd's (kern_proc.c:2525, xnu-8792+)").toBe(launchd.uniqueid);
    else expect(after.puniqueid, 'p_puniqueid kept across exec before macOS 13').toBe(before.puniqueid);
  });

  // proves nothing of the contract: the model of XNU against real processes, not cordon
  it("an exec puts a process back at the head of the kernel's list (13+)", async () => {
    const t = useTag();
    // first is forked before second, and execs after it.
    const out = script(t, '(sleep 1; exec sleep 30) & echo "PID first $!"; sleep 0.2; sleep 30 & echo "PID second $!"; wait');
    await out.until(/^PID second \d+$/m);
    const { first, second } = out.pids();
    const order = (pids: number[]) => pids.indexOf(first!) - pids.indexOf(second!);
    expect(order(await listAll()), 'before the exec: second (forked later) is nearer the head').toBeGreaterThan(0);
    await waitFor(async () => (await must(first!)).comm === 'sleep', { timeout: watchdog(10_000), what: `${first} to exec`, watch: t.tag });
    const list = await listAll();
    expect(list).toContain(first);
    if (from13) expect(order(list), 'after its exec first is at the head again (LIST_INSERT_HEAD of the exec\'s new proc)').toBeLessThan(0);
    else expect(order(list), 'before macOS 13 an exec keeps the place').toBeGreaterThan(0);
  });

  // proves nothing of the contract: the model of XNU against real processes, not cordon
  it('the exec of a platform program restricts it, its forks keep it, the exec of another clears it; kern.procargs2 withholds a restricted environment', async () => {
    const t = useTag();
    const parse = (b: Buffer | number) => (typeof b === 'number' ? `errno ${b}` : posixBinding().parseProcargs2(b, { pointerSize: 8 }).verdict);
    // sh (a platform program) forks a subshell, which execs node (not one).
    const out = script(t, `echo "PID sh $$"; (sleep 30; :) & echo "PID sub $!"; ${JSON.stringify(process.execPath)} -e "console.log('PID node ' + process.pid); setTimeout(() => {}, 30000)" & wait`);
    await out.until(/^PID node \d+$/m);
    const { sh, sub, node } = out.pids();
    expect((await must(sh!)).restricted, 'sh: a platform program').toBe(true);
    expect((await must(sub!)).restricted, 'a fork of sh').toBe(true);
    await waitFor(async () => (await must(node!)).comm === 'node', { timeout: watchdog(10_000), what: 'node to run', watch: t.tag });
    expect((await must(node!)).restricted, 'node, exec\'d by a fork of sh').toBe(false);
    expect(parse(await procargs2(sh!)), "sh's environment").toBe('withheld');
    expect(parse(await procargs2(sub!)), "its fork's").toBe('withheld');
    const nodeArgs = await procargs2(node!);
    expect(parse(nodeArgs), "node's").toBe('present');
    expect(posixBinding().parseProcargs2(nodeArgs as Buffer).env.join('\n')).toContain(`CORDON_TEST_TAG=${t.tag}`);
  });

  // kern_exit.c:1607 (P_LEXIT), :1617 (the task terminated: kern.procargs2
  // EINVAL, kern_sysctl.c:1459-1462), :2612 (SZOMB, after the files are
  // closed); proc_info.c:825-826 (PROC_FLAG_INEXIT). cordon-fixture
  // heavy-exit: its root ends 10 ms after its member began an exit that frees
  // 1 GiB of small pages (100 ms or more).
  // proves nothing of the contract: the model of XNU against real processes, not cordon
  it('a process in its exit reads as alive, PROC_FLAG_INEXIT, and kern.procargs2 answers EINVAL, until it is a zombie', async () => {
    const t = useTag();
    const dir = mkdtempSync(join(tmpdir(), 'cordon-model-exit-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'pids');
    const root = spawnChild(fixtureProgram(), ['heavy-exit', file, '1024'], { env: t.env, stdio: 'ignore' });
    onTestFinished(() => {
      if (root.exitCode === null && root.signalCode === null) root.kill('SIGKILL');
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('watchdog: heavy-exit did not end within 60 s')), watchdog(60_000));
      root.on('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    const pid = Number(readFileSync(file, 'utf8').trim());
    const seen: string[] = [];
    let inExit = false;
    for (const until = Date.now() + watchdog(10_000); Date.now() < until; ) {
      const info = await shortInfo(pid);
      if (typeof info === 'number' || info.status === 5) {
        seen.push(typeof info === 'number' ? `errno ${info}` : 'SZOMB');
        break;
      }
      const args = await procargs2(pid);
      seen.push(`status ${info.status} flags ${info.flags} procargs2 ${typeof args === 'number' ? `errno ${args}` : 'read'}`);
      if ((info.flags & 4) !== 0 && args === 22) inExit = true;
    }
    expect(inExit, `the model's answers for ${pid} until it was a zombie:\n${seen.join('\n')}`).toBe(true);
  });
});
