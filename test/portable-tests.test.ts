// The suite stays runnable on macOS (docs/macos-suite.md): no test file or
// fixture reads /proc or runs a Linux-only tool (runuser, script -qc, flock,
// ss, stat -c) unless scripts/check-portable-tests.mjs
// lists it, as Linux-only with its reason (and a guard in the file) or as not
// yet portable; a listed file that no longer does is dropped from the list;
// the setsid shim stays wired; every listed file is in the doc's table.
// (Reads source files only: nothing runs.)
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script, without types
import { check, LINUX_ONLY, linuxUses, REMAINING } from '../scripts/check-portable-tests.mjs';

describe('the suite reaches for nothing only Linux has, outside the files that say why', () => {
  // proves nothing of the contract: the suite's portability check
  it('scripts/check-portable-tests.mjs finds no problem', () => {
    expect(check() as string[]).toEqual([]);
  });

  // proves nothing of the contract: the suite's portability check
  it('every listed file gives a reason, and none is both Linux-only and remaining', () => {
    const linux = LINUX_ONLY as Record<string, string>;
    const remaining = REMAINING as Record<string, string>;
    for (const [file, reason] of Object.entries({ ...linux, ...remaining })) expect(reason.length, file).toBeGreaterThan(10);
    expect(Object.keys(linux).filter((f) => f in remaining)).toEqual([]);
  });

  // proves nothing of the contract: the suite's portability check
  it('the scan sees a direct /proc read where there is one (this file names none in code)', () => {
    const uses = linuxUses() as Record<string, unknown>;
    expect(uses).toHaveProperty(['test/limits.test.ts']);
    expect(uses).not.toHaveProperty(['test/portable-tests.test.ts']);
  });
});
