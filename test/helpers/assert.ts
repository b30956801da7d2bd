// Assertions the test files share: how a failure looks (a CordonError with a
// code, thrown or rejected), read from the error itself, never from cordon's
// bookkeeping.
import { expect } from 'vitest';
import { within } from './procs.js';

/** `err` is a CordonError with this code (`message` names the case in a failure). */
export function expectCordonError(err: unknown, code: string, message?: string): void {
  expect((err as { isCordonError?: boolean }).isCordonError, message).toBe(true);
  expect((err as { code?: string }).code).toBe(code);
}

/**
 * An `outcome()` that must be a failure: asserts so (`message` says what
 * resolved instead) and returns the error.
 */
export function rejected<E = unknown>(how: { ok: true; value: unknown } | { ok: false; error: unknown }, message?: string): E {
  expect(how.ok, message).toBe(false);
  return (how as { error: unknown }).error as E;
}

/** `fn()` throws synchronously a CordonError with this code. */
export function expectThrowsCode(fn: () => unknown, code: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected a CordonError ${code}`).toBeDefined();
  expectCordonError(caught, code);
}

/** `promise` rejects (bounded) with a CordonError with this code. */
export async function expectRejectsCode(promise: Promise<unknown>, code: string, tag: string): Promise<void> {
  const outcome = await within(
    promise.then(
      () => ({ ok: true as const }),
      (err: unknown) => ({ ok: false as const, err }),
    ),
    10_000,
    `the call to settle (expecting ${code})`,
    tag,
  );
  expect(outcome.ok, `expected a rejection with ${code}`).toBe(false);
  if (!outcome.ok) expectCordonError(outcome.err, code);
}
