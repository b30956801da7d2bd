// The tests' own watchdogs under emulation. Under qemu-user (.ci/arm64.sh)
// every program starts and runs several times slower (node itself takes
// about 0.8 s to start), so a bound that only says "the test gave up
// waiting" (how long a fixture may take to print READY, a test's timeout)
// is multiplied by CORDON_TEST_TIME_SCALE (default 1). A bound that is the
// product's promise (C8's 1 s, a grace, a wait delay) is never scaled: the
// emulated machine must meet it as it is, give or take the documented
// allowance for a loaded machine (promised() below).
const raw = process.env.CORDON_TEST_TIME_SCALE;
const scale = raw === undefined || raw === '' ? 1 : Number(raw);
if (!Number.isFinite(scale) || scale < 1) {
  throw new Error(`CORDON_TEST_TIME_SCALE must be a number of at least 1 (it multiplies the tests' watchdogs); it is ${JSON.stringify(raw)}`);
}

/** What CORDON_TEST_TIME_SCALE says (1 unless set). */
export const TIME_SCALE = scale;

/** A test's own watchdog bound, scaled for emulation (never use it for a product bound). */
export function watchdog(ms: number): number {
  return Math.round(ms * TIME_SCALE);
}

// The load allowance and promised() are shared with the Windows suite (common.mjs).
export { LOAD_ALLOWANCE_MS, promised } from './common.mjs';
