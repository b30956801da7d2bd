// A contained terminal beside node-pty, in the same run (`--only pty`):
//   a. start to prompt: `bash --norc --noprofile -i` on an 80x24 terminal with
//      PS1 set to a marker of the run, from the spawn call until the marker is
//      in the output; each tree is then ended, untimed (cordon's kill(),
//      node-pty's kill(): one still there 2 s later is counted, then SIGKILLed)
//   b. throughput: `cat` of a generated ASCII file through the terminal, from
//      the spawn call until the root has exited and the output has ended
//      (cordon: its 'exit' event and stdout's end; node-pty: onExit, which it
//      emits once its socket closed); MB/s of the file's bytes (10^6)
//   c. left behind: bash -i starts `sleep 1000 &`, `setsid sleep 1000 &`,
//      `(sleep 1000 &)` and `nohup sleep 1000 >/dev/null 2>&1 &`; then
//      node-pty's kill() (SIGHUP to the root, what its users do; onExit is
//      awaited, bounded) or cordon's terminate({ grace: 1000 }); 1 s later the
//      processes carrying the run's tag are counted (a surviving sleep is
//      named by its escape: its session, group, ignored SIGHUP), then SIGKILLed by pid.
// Both sides decode the output as UTF-8 (node-pty's default; cordon's stdout
// with setEncoding), TERM=xterm-256color. The runs alternate between the two.
// node-pty is a peer install (bench/peers/node-pty); without it, its half is
// reported as skipped.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn as cordonSpawn } from '../../dist/index.js';
import { quantile } from './overhead.mjs';
import { cmdline, killTagged, newTag, sleep, sweepTagged, taggedEnv } from './procs.mjs';

const PEER = join(dirname(fileURLToPath(import.meta.url)), '..', 'peers', 'node-pty');
const BASH = ['bash', ['--norc', '--noprofile', '-i']];
const TERM = { cols: 80, rows: 24, term: 'xterm-256color' };
const ESCAPES = 'sleep 1000 & setsid sleep 1000 & (sleep 1000 &) ; nohup sleep 1000 >/dev/null 2>&1 &';
const LINE = 'The quick brown fox jumps over the lazy dog 0123456789'.padEnd(63, '.') + '\n'; // 64 bytes

function loadNodePty() {
  const pkg = join(PEER, 'node_modules', 'node-pty', 'package.json');
  if (!existsSync(pkg)) return { skipped: 'not installed (npm install --prefix bench/peers/node-pty)' };
  try {
    const mod = createRequire(join(PEER, 'package.json'))('node-pty');
    return { mod, version: JSON.parse(readFileSync(pkg, 'utf8')).version };
  } catch (err) {
    return { skipped: `cannot load: ${err.message.split('\n')[0]}` };
  }
}

/** The terminal's output: counted, kept (up to 64 kB, when asked) and watched for markers. */
function sink(keep) {
  let text = '';
  let count = 0;
  const waiters = new Set();
  const times = (s) => text.split(s).length - 1;
  return {
    get text() { return text; },
    get count() { return count; },
    add(chunk) {
      const now = performance.now();
      count += chunk.length;
      if (!keep) return;
      text += chunk;
      if (text.length > 65_536) text = text.slice(-32_768);
      for (const w of waiters) if (times(w.s) >= w.n) (waiters.delete(w), w.resolve(now));
    },
    /** Resolves with the arrival time of the chunk that completed the `n`th `s`. */
    seen(s, n = 1) {
      return times(s) >= n ? Promise.resolve(performance.now()) : new Promise((resolve) => waiters.add({ s, n, resolve }));
    },
  };
}

const exitOf = (promise) => promise.then(() => performance.now());

const LIBS = {
  cordon: {
    how: 'spawn(..., { pty }) + proc.terminate({ grace: 1000 })',
    start(file, args, env, keep) {
      const proc = cordonSpawn(file, args, { env, pty: TERM });
      const out = sink(keep);
      proc.stdout.setEncoding('utf8');
      proc.stdout.on('data', (c) => out.add(c)).on('error', () => {});
      proc.stdin.on('error', () => {}); // EPIPE once the tree is gone
      const ended = new Promise((r) => proc.stdout.once('end', r).once('close', r));
      const exited = new Promise((r) => proc.once('exit', r));
      const result = proc.result.catch((err) => ({ error: err }));
      let settledAs = 'unsettled';
      result.then((r) => (settledAs = r.error ? `rejected: ${r.error.message}` : `settled: ${r.reason}`));
      // A failed spawn rejects proc.result and may never emit 'exit'.
      const failed = proc.result.then(() => new Promise(() => {}));
      const done = exitOf(Promise.race([Promise.all([ended, exited]), failed]));
      done.catch(() => {}); // awaited in b. only
      return {
        out,
        write: (s) => proc.stdin.write(s),
        done,
        stop: () => proc.terminate({ grace: 1000 }),
        end: () => proc.kill(),
        settled: result,
        describe: () => `exit ${proc.exitCode ?? proc.signalCode ?? 'not yet'}, ${settledAs}`,
      };
    },
  },
  'node-pty': {
    how: 'pty.spawn() + term.kill() (SIGHUP to the root)',
    start(file, args, env, keep) {
      const term = LIBS['node-pty'].mod.spawn(file, args, { name: TERM.term, cols: TERM.cols, rows: TERM.rows, env });
      const out = sink(keep);
      term.onData((c) => out.add(c));
      let exit = 'not yet';
      const done = exitOf(new Promise((r) => term.onExit((e) => r((exit = JSON.stringify(e))))));
      return {
        out,
        write: (s) => term.write(s),
        done,
        stop: async () => (term.kill(), done),
        end: async () => (term.kill(), done),
        settled: done,
        describe: () => `onExit ${exit}`,
      };
    },
  },
};

function alive(tag) {
  return sweepTagged(tag).filter((p) => p.tag === tag);
}

/** Which of the escapes a surviving `sleep 1000` was: its session, group and ignored signals say. */
function escapeOf(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    const hupIgnored = (BigInt(`0x${/SigIgn:\s*(\w+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]}`) & 1n) === 1n;
    if (Number(f[3]) === pid) return 'setsid';
    if (hupIgnored) return 'nohup';
    return Number(f[2]) === pid ? 'job' : 'double fork';
  } catch {
    return 'gone';
  }
}

/** What a wait that ran out says: what is alive, the library's view, the output's end. */
function late(what, ms, { tag, h }) {
  const left = alive(tag).map((p) => `${p.pid} ${p.command}`);
  const tail = h?.out.text ? `; output ends ${JSON.stringify(h.out.text.slice(-120))}` : '';
  return new Error(`${what}: not within ${ms} ms (alive: ${left.join('; ') || 'nothing'}${h ? `; ${h.describe()}` : ''}${tail})`);
}

/** `promise`, or after `ms` an error naming what of ctx.tag is still alive. */
async function bounded(promise, ms, what, ctx) {
  let timer;
  const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(late(what, ms, ctx)), ms)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function until(check, ms, what, ctx) {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw late(what, ms, ctx);
    await sleep(20);
  }
}

/**
 * a. Spawn to the prompt. The tree is then ended, untimed: cordon's kill();
 * node-pty's kill(), and if the tree is not gone 2 s later (bash -i may catch
 * a SIGHUP that comes right at its first prompt and read on) it is counted
 * and SIGKILLed by pid.
 */
async function promptOnce(lib, bound) {
  const tag = newTag('ptyprompt');
  const marker = `[${tag}]> `;
  const t0 = performance.now();
  const h = LIBS[lib].start(...BASH, taggedEnv(tag, { PS1: marker }), true);
  const ctx = { tag, h };
  try {
    const t1 = await bounded(h.out.seen(marker), bound, 'the prompt', ctx);
    const ended = await bounded(h.end(), 2000, 'the end', ctx).then(() => true, () => false);
    if (ended) await until(() => alive(tag).length === 0, 2000, 'the tree gone', ctx).catch(() => {});
    return { ms: t1 - t0, stayed: alive(tag).map((p) => p.command) };
  } finally {
    killTagged({ tag });
  }
}

/** b. `cat file` through the terminal: ms until exit + end of output, bytes received. */
async function catOnce(lib, file, bound) {
  const tag = newTag('ptycat');
  const t0 = performance.now();
  const h = LIBS[lib].start('cat', [file], taggedEnv(tag), false);
  const ctx = { tag, h };
  try {
    const t1 = await bounded(h.done, bound, 'the exit and end of output', ctx);
    const bytes = h.out.count;
    // Anything arriving after the end (none is expected) is counted apart.
    await bounded(h.settled, bound, 'the settlement', ctx);
    await sleep(100);
    return { ms: t1 - t0, bytes, late: h.out.count - bytes };
  } finally {
    killTagged({ tag });
  }
}

/** c. The escapes started, the library's stop, 1 s, then what carries the tag. */
async function escapesOnce(lib, bound) {
  const tag = newTag('ptyleft');
  const marker = `[${tag}]> `;
  const h = LIBS[lib].start(...BASH, taggedEnv(tag, { PS1: marker }), true);
  const sleeps = () => alive(tag).filter((p) => p.command === 'sleep 1000');
  const ctx = { tag, h };
  try {
    await bounded(h.out.seen(marker), bound, 'the prompt', ctx);
    h.write(ESCAPES + '\r');
    await until(() => sleeps().length >= 4, bound, 'the four sleeps', ctx);
    // The next prompt, and a moment for readline to be reading (see promptOnce).
    await bounded(h.out.seen(marker, 2), bound, 'the prompt after the jobs', ctx);
    await sleep(200);
    const before = alive(tag).map((p) => p.command);
    const t = performance.now();
    let stopMs = null;
    let stopError;
    await bounded(h.stop(), bound, 'the stop', ctx).then(() => (stopMs = performance.now() - t), (err) => (stopError = err.message));
    await sleep(1000);
    const left = alive(tag);
    return { before: before.length, beforeCommands: before, stopMs, stopError, left: left.length, leftCommands: left.map((p) => cmdline(p.pid) + (p.command === 'sleep 1000' ? ` [${escapeOf(p.pid)}]` : '')) };
  } finally {
    killTagged({ tag });
  }
}

/** Runs `fn(lib)` `n` times per library, alternating; the errors are kept (the first 3), a library stops after 3. */
async function rounds(libs, n, fn, log, what) {
  const out = Object.fromEntries(libs.map((l) => [l, { values: [], errors: [] }]));
  for (let i = 0; i < n; i++) {
    for (const lib of i % 2 === 0 ? libs : [...libs].reverse()) {
      const o = out[lib];
      if (o.errors.length >= 3) continue;
      try {
        o.values.push(await fn(lib));
      } catch (err) {
        o.errors.push(err.message);
        log(`${what} / ${lib}: error: ${err.message}`);
      }
    }
  }
  return out;
}

export async function measurePty({ runs = 20, catRuns = 3, sizeMiB = 32, bound = 10_000, log = () => {} } = {}) {
  const np = loadNodePty();
  if (np.mod) LIBS['node-pty'].mod = np.mod;
  const libs = np.mod ? ['cordon', 'node-pty'] : ['cordon'];
  const res = {
    libraries: libs.map((name) => ({ name, how: LIBS[name].how })),
    nodePty: np.mod ? { version: np.version } : { skipped: np.skipped },
    runs, catRuns, sizeMiB, escapeJobs: ESCAPES, latency: {}, throughput: {}, escapes: {},
  };
  if (np.skipped) log(`node-pty: skipped: ${np.skipped}`);

  // One run per library first, not counted: neither's figures include loading
  // its native code (node-pty's is loaded above; cordon loads its addon at its
  // first spawn) or the first start of anything it keeps ready.
  log(`start to prompt: one first run per library (not counted), then ${runs} runs per library`);
  const first = await rounds(libs, 1, (lib) => promptOnce(lib, bound), log, 'prompt (first)');
  const lat = await rounds(libs, runs, (lib) => promptOnce(lib, bound), log, 'prompt');
  for (const lib of libs) {
    const v = lat[lib].values.map((x) => x.ms);
    const stayed = lat[lib].values.filter((x) => x.stayed.length > 0);
    res.latency[lib] = { runs: v.length, first: first[lib].values[0]?.ms, median: quantile(v, 0.5), p95: quantile(v, 0.95), notEnded: stayed.length, notEndedCommands: stayed.flatMap((x) => x.stayed).slice(0, 10), errors: lat[lib].errors };
  }

  const dir = mkdtempSync(join(tmpdir(), 'cordon-bench-pty-'));
  try {
    const file = join(dir, 'payload.txt');
    const lines = (sizeMiB * 1024 * 1024) / LINE.length;
    writeFileSync(file, LINE.repeat(lines));
    const expected = lines * (LINE.length + 1); // the terminal's ONLCR: \n -> \r\n
    log(`throughput: cat of ${sizeMiB} MiB, ${catRuns} runs per library`);
    const cat = await rounds(libs, catRuns, (lib) => catOnce(lib, file, Math.max(bound, 60_000)), log, 'throughput');
    for (const lib of libs) {
      const v = cat[lib].values;
      const mbps = v.map((x) => (lines * LINE.length) / 1e6 / (x.ms / 1000));
      res.throughput[lib] = {
        runs: v.length, medianMBps: quantile(mbps, 0.5), medianMs: quantile(v.map((x) => x.ms), 0.5),
        expectedBytes: expected, short: v.filter((x) => x.bytes !== expected).map((x) => expected - x.bytes),
        late: v.reduce((n, x) => n + x.late, 0), errors: cat[lib].errors,
      };
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  log('left behind: bash -i with four escaping jobs, then the stop');
  const esc = await rounds(libs, 1, (lib) => escapesOnce(lib, bound), log, 'escapes');
  for (const lib of libs) res.escapes[lib] = { ...(esc[lib].values[0] ?? {}), errors: esc[lib].errors };
  return res;
}
