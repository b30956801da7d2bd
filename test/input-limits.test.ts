// Input and state that must not break cleanup (issue 10, part 5): every
// duration is validated once, the same way everywhere (a value no timer or
// anchor can hold is a typed error, a fraction rounds up, never to 0 = "no
// timeout" / "SIGKILL now"); the anchor rejects garbage on its command line
// and its control channel instead of reading it as 0; launch failures the
// host's own state causes (a deleted working directory, E2BIG) are
// CordonErrors that say what happened; members() never walks a recycled pid.
import { spawn as spawnChild, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmdirSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { Registry, spawn, type ContainedProcess, type CordonError } from '../lib/index.js';
import { parseDuration } from '../lib/duration.js';
import { anchorPath, probe } from '../lib/native.js';
import { expectCordonError, rejected } from './helpers/assert.js';
import { repoRoot } from './helpers/fixtures.js';
import { ensureDist, readReport } from './helpers/host.js';
import { occupyFreedPid, PidOutOfReachError } from './helpers/pids.js';
import { killPids, killTagged, readStat, sleep, TAG_VAR, useTag, waitFor, within, type Tagged } from './helpers/procs.js';
import { missing, onlyWhere } from './helpers/requirements.js';
import { observer } from './helpers/observer.js';
import { tempDir } from './helpers/registry.js';
import { itWhere, tier } from './helpers/tier.js';
import { watchdog } from './helpers/time.js';
import { expectAlive, outcome, startBgTree, startTrapTree } from './helpers/trees.js';

/** The error a thunk throws (fails if it returns). */
function thrown(fn: () => unknown): CordonError {
  try {
    fn();
  } catch (err) {
    return err as CordonError;
  }
  throw new Error('expected a throw, it returned');
}

/**
 * A root with a TERM trap that takes a while (counts to 30000, then writes
 * "done" and exits 7): a SIGKILL within the grace cuts it short, so a file
 * reading "done" proves the polite signal came and the grace was not ~0.
 */
async function startSlowTrap(t: Tagged, options: { grace?: number } = {}) {
  // (The trap's delay is a shell loop, not a `sleep`: the anchor sends
  // SIGTERM to members forked during the grace too. The helper waits for the
  // child to exec sleep, else it would sleep on until the forced kill, 20 s here.)
  const script =
    'trap \'echo started > "$FILE"; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; echo done > "$FILE"; exit 7\' TERM; echo "PID root $$"; sleep 300 & echo "PID child $!"; echo READY; wait';
  const { proc, root, file } = await startTrapTree(t, script, { prefix: 'cordon-limits-', name: 'trap', options });
  return { proc, root, file };
}

/**
 * Test-only path to the control channel: the host's end of the socket pair
 * (AnchorChannel.hostFd, POSIX). Written in full, waiting while the socket
 * buffer is full (Node made the descriptor non-blocking).
 */
async function writeControl(proc: ContainedProcess, data: Buffer): Promise<void> {
  const fd = (proc as unknown as { anchor: { hostFd: number } }).anchor.hostFd;
  expect(fd, 'the host end of the control channel').toBeGreaterThan(2);
  let off = 0;
  while (off < data.length) {
    try {
      off += writeSync(fd, data, off, Math.min(data.length - off, 1 << 20));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      await sleep(1);
    }
  }
}

/** Limits of this machine read with getconf, not from cordon: a positive integer, or an error saying what getconf said. */
function getconf(name: string): number {
  const r = spawnSync('getconf', [name], { encoding: 'utf8', timeout: 20_000 });
  const value = Number((r.stdout ?? '').trim());
  if (r.status !== 0 || !Number.isSafeInteger(value) || value <= 0) {
    throw new Error(`getconf ${name} gave no positive integer (status ${r.status}, stdout ${JSON.stringify(r.stdout)}, ${r.error ?? r.stderr})`);
  }
  return value;
}
const noGetconf = missing('getconf') ?? '';

/** User + system CPU time of a live process, in seconds, as the observer reads it (/proc: clock ticks; ps: its `time`). */
function cpuSeconds(pid: number): number {
  const s = observer.cpuSeconds(pid);
  if (s === undefined) throw new Error(`pid ${pid} is gone: no CPU time to read`);
  return s;
}

describe(`durations, ${tier} tier`, () => {
  // proves C3
  it('terminate({ grace }) beyond 2^31-1 ms is a typed error; the tree is not killed', async () => {
    const t = useTag();
    const { proc, root, file } = await startSlowTrap(t);
    for (const grace of [2 ** 31, 1e12, 1e21, -1, Number.NaN, Infinity]) {
      const how = await outcome(proc.terminate({ grace }), 5000, `terminate({ grace: ${grace} })`, t.tag);
      expect(rejected<CordonError>(how, `terminate({ grace: ${grace} }) was accepted`).code).toBe('ERR_INVALID_ARG_VALUE');
    }
    // Nothing was sent: neither the polite signal nor a kill.
    await sleep(300);
    expectAlive([root], 'after the refused terminate() calls');
    expect(existsSync(file), 'the TERM trap ran').toBe(false);
    await within(proc.terminate({ grace: 10_000 }), 20_000, 'terminate()', t.tag);
    expect(readFileSync(file, 'utf8')).toBe('done\n');
  });

  // proves C3
  it('a grace just under the limit is a long grace, not an immediate SIGKILL', async () => {
    const t = useTag();
    const { proc, file } = await startSlowTrap(t);
    await within(proc.terminate({ grace: 2 ** 31 - 1 }), 20_000, 'terminate() with the longest grace', t.tag);
    expect(readFileSync(file, 'utf8'), 'the trap got its window').toBe('done\n');
    expect((await within(proc.result, 5000, 'the result', t.tag)).exitCode).toBe(7);
  });

  // proves C3 (own report): typed errors for durations
  it('new Registry({ grace }), owner.stop/release({ grace }) and detach({ keepAlive }) validate like spawn', async () => {
    for (const grace of [2 ** 31, 1e21, -1, Number.NaN, '3000']) {
      const e = thrown(() => new Registry({ grace: grace as number }));
      expect(e.isCordonError, `new Registry({ grace: ${String(grace)} })`).toBe(true);
      expect(e.code).toMatch(/^ERR_INVALID_ARG_(VALUE|TYPE)$/);
    }
    expect(new Registry({ grace: 0.5 }).grace, 'a fraction rounds up').toBe(1);
    const reg = new Registry({ logDir: tempDir('cordon-limits-logs-') });
    const owner = reg.owner('limits');
    await expect(owner.stop({ grace: 1e21 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
    await expect(owner.release({ grace: 2 ** 31 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
    expect(thrown(() => owner.detach({ keepAlive: 2 ** 31 })).code).toBe('ERR_INVALID_ARG_VALUE');
    await owner.release();
  });

  // proves C3 (own report): the CLI's reading of durations
  it('the CLI reads durations the same way: a fraction of a millisecond rounds up, too long is refused', () => {
    expect(parseDuration('--timeout', '0.4ms')).toBe(1);
    expect(parseDuration('--grace', '1.5s')).toBe(1500);
    expect(thrown(() => parseDuration('--timeout', '1000h')).code).toBe('ERR_INVALID_ARG_VALUE');
    expect(thrown(() => parseDuration('--grace', '1e21')).code).toBe('ERR_INVALID_ARG_VALUE');
  });

  // proves C3
  it("one rule for every duration: a number is milliseconds, a string carries its unit, a bare '30' is refused before anything runs", async () => {
    const t = useTag();
    const e = thrown(() => parseDuration('--timeout', '30'));
    expect(e.code).toBe('ERR_INVALID_ARG_VALUE');
    expect(e.message, 'the error says how to write it').toContain('"30ms" or "30s"');
    // A marker file the command would make: nothing may run for a refused value.
    const dir = tempDir('cordon-durations-');
    const marker = join(dir, 'ran');
    for (const options of [{ timeout: '30' }, { grace: '3000' }, { waitDelay: '2 s' }, { lease: '30' }, { interruptGrace: 500n }]) {
      const err = thrown(() => spawn('sh', ['-c', `touch ${marker}`], { env: t.env, ...(options as object) }));
      expect(err.code, JSON.stringify(options, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))).toMatch(/^ERR_INVALID_ARG_(VALUE|TYPE)$/);
    }
    expect(thrown(() => new Registry().owner('durations', { lease: '10' })).code).toBe('ERR_INVALID_ARG_VALUE');
    expect(new Registry({ grace: '2.5s' }).grace).toBe(2500);
    // A string with its unit is the same duration as the number: timeout '300ms' ends a sleep.
    const proc = spawn('sleep', ['300'], { env: t.env, timeout: '300ms' });
    const result = await within(proc.result, watchdog(15_000), 'the timeout to end the command', t.tag);
    expect(result.reason).toBe('timeout');
    expect(existsSync(marker), 'a refused spawn ran its command').toBe(false);
  });

  // proves C3
  it('the CLI refuses a duration without its unit: a usage error (exit 2) that shows how to write it; nothing runs', async () => {
    const t = useTag();
    await ensureDist();
    const dir = tempDir('cordon-durations-');
    const marker = join(dir, 'ran');
    const r = spawnSync(process.execPath, [join(repoRoot, 'dist', 'cli.js'), 'run', '--timeout', '10', '--', 'sh', '-c', `touch ${marker}`], { env: t.env, encoding: 'utf8', timeout: watchdog(20_000) });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toContain('"10ms" or "10s"');
    expect(existsSync(marker), 'the command ran').toBe(false);
  });

  // proves C3, C10
  it('timeout: 0.5 is a timeout of 1 ms, not "no timeout"', async () => {
    const t = useTag();
    const proc = spawn('sleep', ['300'], { env: t.env, timeout: 0.5 });
    const result = await within(proc.result, 15_000, 'the sub-millisecond timeout to end the command', t.tag);
    expect(result.reason).toBe('timeout');
  });
});

const posixAnchor = onlyWhere(process.platform !== 'win32', 'the POSIX anchor; Windows has test/win');
describe.skipIf(posixAnchor.skip)(`the anchor's input, ${tier} tier${posixAnchor.note}`, () => {
  // proves C3: the anchor run by hand refuses it
  it('the anchor refuses a --grace it cannot read, instead of reading it as 0', () => {
    for (const bad of ['1e+21', '-5', '99999999999', '12abc', '']) {
      const r = spawnSync(anchorPath(), ['--grace', bad, '--', '/bin/true', 'true'], { encoding: 'utf8', timeout: 10_000 });
      expect(r.status, `--grace "${bad}"`).toBe(64);
      expect(r.stderr, `--grace "${bad}"`).toMatch(/--grace takes whole milliseconds/);
    }
  });

  // Anchor protocol choice: a TERM whose grace is not digits in range is
  // still a request to end the tree; it gets the teardown grace (--grace),
  // never 0 (= SIGKILL now, what atoi made of it).
  for (const line of ['TERM 1e+21', 'TERM abc', 'TERM -1', 'TERM 99999999999']) {
    // proves C3
    it(`"${line}" on the control channel is a TERM with the teardown grace, not a KILL`, async () => {
      const t = useTag();
      const { proc, file } = await startSlowTrap(t, { grace: 20_000 });
      await writeControl(proc, Buffer.from(`${line}\n`));
      await within(proc.result, 20_000, 'the tree to end through its TERM trap', t.tag);
      expect(readFileSync(file, 'utf8'), 'the trap ran to its end (it was not SIGKILLed)').toBe('done\n');
      expect((await proc.result).exitCode).toBe(7);
    });
  }

  // proves C3
  itWhere(noGetconf === '', 'a 16 MiB control line without a newline costs little CPU, and the TERM after it is obeyed', noGetconf, async () => {
    const t = useTag();
    const { proc, file } = await startSlowTrap(t, { grace: 20_000 });
    const anchor = proc.anchorPid!;
    const before = cpuSeconds(anchor);
    // A KILL buried in an over-long line must not be obeyed either.
    const junk = Buffer.alloc(16 * 1024 * 1024, 'x');
    junk.write('KILL', 0);
    await within(writeControl(proc, Buffer.concat([junk, Buffer.from('\nTERM 20000\n')])), 60_000, 'writing 16 MiB to the control channel', t.tag);
    // The trap starting means the anchor has read everything up to the TERM;
    // it lives on while the trap runs, so its CPU time can be read now.
    await waitFor(() => existsSync(file), { timeout: 30_000, what: 'the TERM after the long line to reach the trap', watch: t.tag });
    const spent = cpuSeconds(anchor) - before;
    await within(proc.result, 20_000, 'the tree to end through its TERM trap', t.tag);
    expect(readFileSync(file, 'utf8'), 'the TERM after the long line was obeyed, with its grace').toBe('done\n');
    // A regression detector, not a benchmark: reading 16 MiB in 64 KiB pieces
    // takes milliseconds; the quadratic reader took ~9 s of CPU. 2 s is far
    // from both, and it is CPU time, not wall time, so load cannot fail it.
    expect(spent, 'seconds of anchor CPU for 16 MiB of control input').toBeLessThan(2);
  });
});


describe.skipIf(posixAnchor.skip)(`launch failures the host's own state causes, ${tier} tier${posixAnchor.note}`, () => {
  // proves C6 (own report): the error for a deleted working directory
  it("a deleted host working directory is a CordonError saying so; an explicit cwd still works", async () => {
    const t = useTag();
    await ensureDist();
    const dir = mkdtempSync(join(tmpdir(), 'cordon-gone-cwd-'));
    onTestFinished(() => {
      try {
        rmdirSync(dir);
      } catch {
        // removed by the host, as intended
      }
    });
    // A host of our own (plain child_process, tagged) whose cwd is removed under it.
    const script = `
      import { rmdirSync } from 'node:fs';
      const { spawn } = await import(${JSON.stringify(join(repoRoot, 'dist', 'index.js'))});
      rmdirSync(process.cwd());
      const report = {};
      try {
        spawn('true', [], {});
        report.implicit = 'ran';
      } catch (e) {
        report.implicit = { cordon: e.isCordonError === true, code: e.code, stage: e.stage, message: e.message };
      }
      try {
        const r = await spawn('sh', ['-c', 'exit 3'], { cwd: '/' }).result;
        report.explicit = r.exitCode;
      } catch (e) {
        report.explicit = { code: e.code, message: e.message };
      }
      console.log('REPORT ' + JSON.stringify(report));
    `;
    const host = spawnChild(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, env: t.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const hostExit = new Promise((resolve) => host.once('exit', resolve));
    const report = await readReport(host);
    expect(report.implicit, 'spawn() without cwd in a host whose cwd was deleted').toMatchObject({ cordon: true, code: 'ENOENT', stage: 'launch' });
    expect(report.implicit.message).toMatch(/working directory.*deleted.*Pass an existing directory as cwd/);
    expect(report.explicit, 'spawn() with cwd: "/" in the same host').toBe(3);
    await within(hostExit, 10_000, 'the host to exit', t.tag);
  });

  // proves C6: a launch failure, and nothing ran
  it('arguments too large for exec are E2BIG, said as such (not "the anchor could not be started")', () => {
    const t = useTag();
    // One argument over MAX_ARG_STRLEN (128 KiB) fails every exec with E2BIG.
    const e = thrown(() => spawn('true', ['x'.repeat(200 * 1024)], { env: t.env }));
    expectCordonError(e, 'E2BIG');
    expect(e.stage).toBe('launch');
    expect(e.message).toMatch(/arguments and environment are too large/);
    expect(e.message).toMatch(/nothing ran/);
    expect(t.procs()).toEqual([]);
  });

  // The host checks what the kernel would refuse before anything runs (qemu-user
  // cannot report posix_spawn's failed exec synchronously). Both limits are
  // read here with getconf, not from cordon.
  const linuxLimits = onlyWhere(process.platform === 'linux', "the host reads Linux's exec limits (32 pages a string); elsewhere the anchor's exec reports E2BIG");
  describe.skipIf(linuxLimits.skip)(`E2BIG, checked by the host before anything runs${linuxLimits.note}`, () => {
    // Read now (a title names ARG_MAX) where getconf is here; elsewhere 0,
    // and every test that uses them is skipped.
    const page = noGetconf ? 0 : getconf('PAGESIZE');
    const argMax = noGetconf ? 0 : getconf('ARG_MAX');
    // The darwin build (run on Linux on the model of XNU's process table,
    // test/xnu-model) reads no exec limits, as on macOS: there the exec's own
    // E2BIG answers (the test after these).
    const noHostCheck =
      noGetconf || (probe().argMax === undefined ? "this build reads no exec limits (the darwin build: the exec's own E2BIG answers, tested below)" : '');

    // proves C6: a launch failure, and nothing ran
    itWhere(noHostCheck === '', 'an environment string of 32 pages is refused, naming the variable', noHostCheck, () => {
      const t = useTag();
      const e = thrown(() => spawn('true', [], { env: { ...t.env, CORDON_BIG: 'x'.repeat(32 * page - 'CORDON_BIG='.length) } }));
      expectCordonError(e, 'E2BIG');
      expect(e.stage).toBe('launch');
      expect(e.message).toMatch(/environment variable CORDON_BIG is \d+ bytes; one string must stay under/);
      expect(e.message).toMatch(/nothing ran/);
      expect(t.procs()).toEqual([]);
    });

    // proves C6: a launch failure, and nothing ran
    itWhere(noHostCheck === '', "the host's own environment (no env option) with a string of 32 pages is refused, naming the variable", noHostCheck, () => {
      const t = useTag();
      // Without `env` the addon reads the host's environment itself; the
      // check before anything runs reads its size there too.
      const saved = { [TAG_VAR]: process.env[TAG_VAR], CORDON_BIG: process.env.CORDON_BIG };
      onTestFinished(() => {
        for (const [k, v] of Object.entries(saved)) {
          if (v === undefined) delete process.env[k];
          else process.env[k] = v;
        }
      });
      process.env[TAG_VAR] = t.tag;
      process.env.CORDON_BIG = 'x'.repeat(32 * page - 'CORDON_BIG='.length);
      const e = thrown(() => spawn('true'));
      delete process.env.CORDON_BIG;
      expectCordonError(e, 'E2BIG');
      expect(e.stage).toBe('launch');
      expect(e.message).toMatch(/environment variable CORDON_BIG is \d+ bytes; one string must stay under/);
      expect(t.procs()).toEqual([]);
    });

    // proves nothing of the contract: the kernel's argument limit, passed whole
    itWhere(noGetconf === '', 'the longest string the kernel takes (32 pages less its NUL) is not refused, and arrives whole', noGetconf, async () => {
      const t = useTag();
      const arg = 'x'.repeat(32 * page - 1);
      const proc = spawn('sh', ['-c', 'echo ${#1}', 'sh', arg], { env: t.env, stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      expect((await within(proc.result, 20_000, 'the command with the longest argument', t.tag)).exitCode).toBe(0);
      expect(out.trim()).toBe(String(arg.length));
    });

    // proves C6: a launch failure, and nothing ran
    itWhere(noHostCheck === '', `arguments that together exceed ARG_MAX (${argMax || 'unknown'} bytes here) are refused, saying so`, noHostCheck, () => {
      const t = useTag();
      const chunk = 'y'.repeat(16 * page); // each well under the one-string limit
      const args = Array.from({ length: Math.ceil(argMax / chunk.length) + 1 }, () => chunk);
      const e = thrown(() => spawn('true', args, { env: t.env }));
      expectCordonError(e, 'E2BIG');
      expect(e.stage).toBe('launch');
      expect(e.message).toMatch(/take \d+ bytes, over the \d+ one exec can carry here \(ARG_MAX\)/);
      expect(t.procs()).toEqual([]);
    });

    // What the host's check cannot see (limits it could not read; the kernel
    // takes exactly what sysconf says on the kernels Node runs on, 4.18+) is
    // still the exec's own E2BIG, the same typed error. Here a host of our own
    // forgets the limits (deletes them from its cached probe), so the anchor's
    // posix_spawn is what fails.
    const emulated = process.env.CORDON_TEST_EMULATOR;
    // proves C6: a launch failure, and nothing ran
    it.skipIf(!!emulated)(
      `without the host's check, the exec's own E2BIG is the same typed error${emulated ? ` (skipped: under ${emulated}, posix_spawn's child runs as a plain fork, so its failed exec is not reported to the caller; the host's check above is what reports it there)` : ''}`,
      async () => {
        const t = useTag();
        await ensureDist();
        const script = `
          const { spawn } = await import(${JSON.stringify(join(repoRoot, 'dist', 'index.js'))});
          const { probe } = await import(${JSON.stringify(join(repoRoot, 'dist', 'native.js'))});
          delete probe().pageSize;
          delete probe().argMax;
          try {
            spawn('true', ['x'.repeat(200 * 1024)], {});
            console.log('REPORT ' + JSON.stringify({ ran: true }));
          } catch (e) {
            console.log('REPORT ' + JSON.stringify({ code: e.code, stage: e.stage, syscall: e.syscall, message: e.message }));
          }
        `;
        const host = spawnChild(process.execPath, ['--input-type=module', '-e', script], { env: t.env, stdio: ['ignore', 'pipe', 'pipe'] });
        const hostExit = new Promise((resolve) => host.once('exit', resolve));
        const report = await readReport(host);
        expect(report, 'spawn() of a 200 KiB argument, the host\'s check off').toMatchObject({ code: 'E2BIG', stage: 'launch', syscall: 'spawn' });
        expect(report.message).toMatch(/too large for one exec.*nothing ran/);
        await within(hostExit, 10_000, 'the host to exit', t.tag);
        expect(t.procs()).toEqual([]);
      },
    );
  });

  // proves C2
  it("members() after ERR_CORDON_ANCHOR_LOST never lists through the dead anchor's pid, even once it is reused", { timeout: watchdog(75_000) }, async (ctx) => {
    const t = useTag();
    // The freed pid handed to an unrelated process with a child of its own:
    // listing "the anchor's tree" now would list that child. Another process
    // may take the freed pid first: then it all starts over (within 40 s).
    let occupied: Awaited<ReturnType<typeof occupyFreedPid<ContainedProcess>>>;
    try {
      occupied = await occupyFreedPid({
        setup: async () => {
          const { proc } = await startBgTree(t);
          const anchor = proc.anchorPid!;
          const anchorStart = readStat(anchor)?.start;
          // The test's own child (the host's unreaped anchor), killed by pid.
          killPids([anchor]);
          const how = await outcome(proc.result, 10_000, 'the result after the anchor was killed', t.tag);
          expect((how as { error: CordonError }).error.code).toBe('ERR_CORDON_ANCHOR_LOST');
          expect(proc.members(), 'right after the anchor was lost').toEqual([]);
          // What the tier could not end (capabilities() says which, see
          // anchor-death.test.ts) is ended here, by tag: then nothing pins the pid
          // (in the process-group tier the members' group id is the anchor's pid).
          killTagged(t.tag);
          // Reaped by the host: no process has the pid, or another one took it
          // already (occupyFreedPid counts that as a miss).
          const reaped = () => readStat(anchor) === undefined || readStat(anchor)!.start !== anchorStart;
          await waitFor(() => reaped() && t.procs().length === 0, { timeout: 5000, what: `pid ${anchor} to be free`, watch: t.tag });
          return { scenario: proc, target: anchor };
        },
        // The lost tree's members were ended above: only strays of a miss remain.
        teardown: async () => void killTagged(t.tag),
        env: t.env,
        command: ['sh', '-c', 'sleep 300 & wait'],
        timeout: watchdog(40_000),
      });
    } catch (err) {
      if (!(err instanceof PidOutOfReachError)) throw err;
      console.log(`skipped: ${err.message}`);
      return ctx.skip(err.message);
    }
    const { scenario: proc, occ, misses } = occupied;
    if (misses.length > 0) console.log(`set up again after ${misses.length} missed attempt(s):\n${misses.join('\n')}`);
    const anchor = occ.pid;
    await waitFor(() => t.procs().some((p) => p.ppid === anchor), { timeout: 5000, what: 'the occupant to start its child', watch: t.tag });
    expect(proc.members(), `with pid ${anchor} reused by a process with a child`).toEqual([]);
    killTagged(t.tag); // the occupant and its child
  });
});
