// Plain JavaScript that both suites import: the vitest suite (test/helpers/*.ts,
// its fixtures) and the Windows suite (test/win/*.mjs and its fixtures, run by
// `node --test`, natively or under Wine by .ci/windows.sh, which reaches this
// file in the checkout through Wine's Z: drive). Types: common.d.mts.
//
// Reading fixtures' output and bounding waits needs nothing else. Liveness
// and the waits that name survivors need a probe: how the suite sees a
// process from outside (the vitest suite: /proc or ps, helpers/observer.ts;
// the Windows suite: the addon's processStart, helpers.mjs). Each suite
// installs its own with useProbe() when its helpers load; nothing here reads
// /proc, tags processes or imports vitest.
//
// Identity: a process is its pid and its start stamp. The first time a test
// learns a pid (a fixture printed it: parsePids; or rememberIdentity), the
// stamp of the process on it then is kept, and alive() is true only for that
// very process: a pid freed and handed to another process (pid-reuse.test.ts
// does that on purpose while other files run) is not "still alive". A pid
// learned after its process was gone stays gone.

/**
 * How much later than promised a test may see a promise kept: after the
 * anchor acts, the kernel's teardown, the reaping, the anchor's walks of
 * /proc and the test's own event loop all wait for a CPU. It is this
 * machine's own delay, measured once at the start of the run by the global
 * setup (helpers/allowance.ts: the p99 lateness of short timers, plus the
 * slowest of a few spawn-and-reaps of a trivial process, plus two of the
 * slowest walks of every process's /proc entry) and handed to the workers
 * in CORDON_TEST_ALLOWANCE_MS; it is kept between ALLOWANCE_FLOOR_MS and
 * ALLOWANCE_CAP_MS. Where nothing measured it (the Windows suite, which has
 * no global setup) it is the cap: 2,000 ms, what a 500 ms grace was once
 * seen to need with two busy loops and 2,000 idle processes on a 2-core
 * host. A bound of the product's (C8's 1 s, a grace, a wait delay) is
 * asserted as promised(ms): the promise plus this allowance, timed from the
 * cause (the kill, the root's exit as its own output dates it), never scaled
 * for emulation.
 */
export const ALLOWANCE_VAR = 'CORDON_TEST_ALLOWANCE_MS';
/** The least allowance: a timer, a kill and a reap on an idle machine take under 100 ms, but load that comes after the measurement (CI builds the zig prebuilds beside lane 1) was seen to add up to about 200 ms: 500 ms keeps a 2.5x margin over that. */
export const ALLOWANCE_FLOOR_MS = 500;
/** The most allowance: a machine slower than this fails the bounds, as it should. */
export const ALLOWANCE_CAP_MS = 2000;

/** The allowance for `measured` ms, kept between the floor and the cap. */
export function clampAllowance(measured) {
  return Math.min(ALLOWANCE_CAP_MS, Math.max(ALLOWANCE_FLOOR_MS, Math.ceil(measured)));
}

function allowanceFromEnv() {
  const raw = typeof process === 'undefined' ? undefined : process.env[ALLOWANCE_VAR];
  if (raw === undefined || raw === '') return ALLOWANCE_CAP_MS;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${ALLOWANCE_VAR} must be a number of ms; it is ${JSON.stringify(raw)}`);
  return clampAllowance(n);
}

/** This run's allowance (see above). */
export const LOAD_ALLOWANCE_MS = allowanceFromEnv();

/** A bound the product promises, as a test on this machine asserts it (see LOAD_ALLOWANCE_MS). */
export function promised(ms) {
  return ms + LOAD_ALLOWANCE_MS;
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The `PID <name> <pid>` lines of a fixture's output (a terminal's or
 * Windows' \r\n line ends too), as name -> pid; `onPid(pid, name)` is called
 * for each line, in order. Pure parsing: parsePids() also keeps identities.
 */
export function parsePidLines(text, onPid) {
  const out = {};
  for (const m of text.matchAll(/^PID (\S+) (\d+)\r?$/gm)) {
    const pid = Number(m[2]);
    out[m[1]] = pid;
    onPid?.(pid, m[1]);
  }
  return out;
}

/**
 * Calls `onLine` with every whole line the stream delivers, trimmed (the
 * stream is read as UTF-8). Returns what has come after the last newline.
 */
export function onLines(stream, onLine) {
  let rest = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    rest += chunk;
    let nl;
    while ((nl = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      onLine(line);
    }
  });
  return () => rest;
}

/**
 * Races `promise` against a watchdog of `ms`; when it fires, rejects with the
 * error `failure()` makes then (so that it can say what was still alive).
 */
export async function withWatchdog(promise, ms, failure) {
  let timer;
  const watchdog = new Promise((_, reject) => {
    timer = setTimeout(() => reject(failure()), ms);
  });
  try {
    return await Promise.race([promise, watchdog]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Checks `check()` (it may return a promise) every `interval` ms until it
 * holds or `ms` have passed; it is checked once more after the deadline.
 * Resolves whether it held: the caller says what failed.
 */
export async function pollUntil(check, ms, interval) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(interval);
  }
}

// ---- the probe and identities ---------------------------------------------

let probe;

/** Installs the suite's probe (see common.d.mts, Probe): the last one installed is used. */
export function useProbe(p) {
  probe = p;
}

function theProbe() {
  if (!probe) throw new Error("no process probe installed: the suite's helpers call useProbe() as they load (helpers/procs.ts, win/helpers.mjs)");
  return probe;
}

/** Never equal to a start stamp: the process a test learned of was gone already. */
const GONE = Symbol('gone');
const identities = new Map();

/**
 * Keeps the identity of the process on `pid` now (its start stamp, or that
 * it is gone), unless the pid's identity is known already. Returns `pid`.
 */
export function rememberIdentity(pid) {
  if (!identities.has(pid)) identities.set(pid, theProbe().start(pid) ?? GONE);
  return pid;
}

/**
 * Keeps the identity of the process on `pid` now, replacing what was known:
 * for a process the test has just started itself on a pid it knew of before
 * (a recycled pid it was waiting for).
 */
export function renewIdentity(pid) {
  identities.delete(pid);
  return rememberIdentity(pid);
}

/** Forgets every identity kept: a new test's pids are its own. */
export function forgetIdentities() {
  identities.clear();
}

/**
 * A live process has `pid` (a zombie is not live), and where the test knows
 * the pid's identity, it is that very process.
 */
export function alive(pid) {
  const start = theProbe().start(pid);
  if (start === undefined) return false;
  return sameIdentity(pid, start);
}

/**
 * The process now on `pid`, whose start stamp is `start` (read by the probe
 * or by an observer of the suite's own), is the one the test knows on that
 * pid: true where no identity is kept, false where the pid was gone when the
 * test first saw it (another process has it now).
 */
export function sameIdentity(pid, start) {
  const known = identities.get(pid);
  return known === undefined || known === start;
}

/**
 * parsePidLines(), and each pid's identity kept (rememberIdentity) before
 * `onPid(pid, name)` is called.
 */
export function parsePids(text, onPid) {
  return parsePidLines(text, (pid, name) => {
    rememberIdentity(pid);
    onPid?.(pid, name);
  });
}

// ---- waits that name what was still alive ---------------------------------

/**
 * The live processes of a watch, one { pid, line } each: a pid (alive()), an
 * object with survivors(), what the probe lists for a string (the vitest
 * suite: a tag), or a list of those.
 */
export function survivors(watch) {
  const seen = new Map();
  const add = (w) => {
    if (w === undefined || w === null) return;
    if (Array.isArray(w)) {
      for (const x of w) add(x);
    } else if (typeof w === 'number') {
      if (alive(w) && !seen.has(w)) seen.set(w, { pid: w, line: theProbe().describe(w) });
    } else if (typeof w === 'string') {
      const p = theProbe();
      if (!p.named) throw new TypeError(`the ${p.name} probe lists no processes by name (${JSON.stringify(w)}): watch pids`);
      for (const s of p.named(w)) if (!seen.has(s.pid)) seen.set(s.pid, s);
    } else if (typeof w.survivors === 'function') {
      for (const s of w.survivors()) if (!seen.has(s.pid)) seen.set(s.pid, s);
    } else {
      throw new TypeError(`not a watch: ${String(w)}`);
    }
  };
  add(watch);
  return [...seen.values()];
}

function stillAlive(watch) {
  if (watch === undefined) return '';
  const live = survivors(watch);
  return `\nstill alive:\n${live.length ? live.map((s) => `  ${s.line}`).join('\n') : '  (none)'}`;
}

/** Races `promise` against a watchdog of `timeout` ms that fails naming `what` and the survivors of `watch`. */
export function within(promise, timeout, what, watch) {
  return withWatchdog(promise, timeout, () => new Error(`watchdog: ${what} did not happen within ${timeout} ms${stillAlive(watch)}`));
}

/**
 * Polls `check()` (it may return a promise) until it holds; after `timeout`
 * ms fails naming `what` and the survivors of `watch`.
 */
export async function waitFor(check, { timeout, what, watch }) {
  if (await pollUntil(check, timeout, theProbe().pollMs)) return;
  throw new Error(`watchdog: timed out after ${timeout} ms waiting for: ${what}${stillAlive(watch)}`);
}

/** Resolves once nothing of `watch` is alive; after `timeout` ms fails naming the survivors. */
export function waitGone(watch, timeout, what = 'every watched process to be gone') {
  return waitFor(() => survivors(watch).length === 0, { timeout, what, watch });
}
