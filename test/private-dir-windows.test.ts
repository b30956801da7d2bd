// The decision on a Windows private directory (lib/private-dir.ts's
// windowsDirProblem()), run on any platform over what the addon reads of a
// directory (privateDirFacts: owner, DACL, reparse point): the cases Wine
// cannot make (a junction, another user's folder, an inherit-only ACE for
// Users, a NULL DACL) as well as those it can. The directories themselves,
// made and planted, are test/win/private-dir.test.mjs's.
import { describe, expect, it } from 'vitest';
import { windowsDirProblem, type WindowsDirFacts } from '../lib/private-dir.js';

const mine: WindowsDirFacts = { directory: true, reparse: false, owner: 'self', dacl: [{ allow: true, sid: 'self' }] };

describe('windowsDirProblem: a directory is private when only this user (and SYSTEM, Administrators) can use it', () => {
  // proves nothing of the contract: a pure decision on a directory's security (threat model, no clause)
  it('accepts what makePrivateDir makes (one ACE, this user), and what Wine reads of it (SYSTEM and this user)', () => {
    expect(windowsDirProblem(mine)).toBeUndefined();
    expect(windowsDirProblem({ ...mine, dacl: [{ allow: true, sid: 'system' }, { allow: true, sid: 'self' }] })).toBeUndefined();
  });

  // proves nothing of the contract: a pure decision on a directory's security (threat model, no clause)
  it('accepts one owned by Administrators (an elevated administrator made it) or SYSTEM, and CREATOR OWNER in the DACL', () => {
    expect(windowsDirProblem({ ...mine, owner: 'administrators' })).toBeUndefined();
    expect(windowsDirProblem({ ...mine, owner: 'system', dacl: [{ allow: true, sid: 'administrators' }, { allow: true, sid: 'creator-owner' }] })).toBeUndefined();
  });

  // proves nothing of the contract: a pure decision on a directory's security (threat model, no clause)
  it('refuses a junction or any other reparse point, whatever its security says', () => {
    expect(windowsDirProblem({ ...mine, reparse: true })).toMatch(/junction/);
    expect(windowsDirProblem({ ...mine, directory: false })).toBe('is not a directory');
  });

  // proves nothing of the contract: a pure decision on a directory's security (threat model, no clause)
  it("refuses another user's folder (its owner), even with a DACL of this user's", () => {
    expect(windowsDirProblem({ ...mine, owner: 'S-1-5-21-1-2-3-1001' })).toBe('is owned by S-1-5-21-1-2-3-1001, not by this user');
  });

  // proves nothing of the contract: a pure decision on a directory's security (threat model, no clause)
  it('refuses a DACL that admits anyone else, inherit-only ACEs too (what is made inside would get them), and a NULL DACL', () => {
    const everyone = { ...mine, dacl: [{ allow: true, sid: 'self' }, { allow: true, sid: 'S-1-1-0' }, { allow: true, sid: 'S-1-5-32-545' }, { allow: true, sid: 'S-1-1-0' }] };
    expect(windowsDirProblem(everyone)).toBe('has a DACL that admits S-1-1-0, S-1-5-32-545 besides this user');
    expect(windowsDirProblem({ ...mine, dacl: [{ allow: true, sid: 'unknown' }] })).toMatch(/admits unknown/);
    expect(windowsDirProblem({ ...mine, dacl: null })).toMatch(/no DACL/);
  });

  // proves nothing of the contract: a pure decision on a directory's security (threat model, no clause)
  it('does not count deny ACEs: they grant nothing', () => {
    expect(windowsDirProblem({ ...mine, dacl: [{ allow: false, sid: 'S-1-1-0' }, { allow: true, sid: 'self' }] })).toBeUndefined();
  });
});
