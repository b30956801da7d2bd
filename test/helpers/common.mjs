// Plain JavaScript that both suites import: the vitest suite (test/helpers/*.ts,
// its fixtures) and the Windows suite (test/win/*.mjs and its fixtures, run by
// `node --test`, natively or under Wine by .ci/windows.sh). Nothing here reads
// /proc, tags processes or imports vitest: how each suite observes processes
// stays with that suite; what is here is how both read fixtures' output and
// bound their waits. Types for the TypeScript side: common.d.mts.

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The `PID <name> <pid>` lines of a fixture's output (a terminal's or
 * Windows' \r\n line ends too), as name -> pid; `onPid(pid, name)` is called
 * for each line, in order.
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
