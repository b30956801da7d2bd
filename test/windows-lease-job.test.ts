// Windows: whether a leased anchor can outlive its host, judged from the Job
// Object the host runs in (lib/anchor/windows.ts), on any platform with the
// job's answer given. The addon's reading of a real job, and a host refused
// or not inside one made by test/win/fixtures/in-job.cc, are in
// test/win/lease.test.mjs (Wine reads every job's limits as none, so the
// refusal itself is observed by the GitHub windows job).
import { describe, expect, it } from 'vitest';
import { leaseBlockingJob } from '../lib/anchor/windows.js';
import { leaseJobBound } from '../lib/errors.js';

const KILL_ON_JOB_CLOSE = 0x2000;
const SILENT_BREAKAWAY_OK = 0x1000;
const BREAKAWAY_OK = 0x800;
const DIE_ON_UNHANDLED_EXCEPTION = 0x400;

describe('Windows: a lease in the host\'s Job Object', () => {
  it('is kept by a host in no job, or in one whose limits cannot be read', () => {
    expect(leaseBlockingJob({ inJob: false, limitFlags: null })).toBeUndefined();
    expect(leaseBlockingJob({ inJob: true, limitFlags: null })).toBeUndefined();
  });

  it('is refused in a job that kills its members on close and lets none break away silently', () => {
    expect(leaseBlockingJob({ inJob: true, limitFlags: KILL_ON_JOB_CLOSE })).toBe(KILL_ON_JOB_CLOSE);
    // Breakaway on request only: Node starts a detached child without CREATE_BREAKAWAY_FROM_JOB.
    expect(leaseBlockingJob({ inJob: true, limitFlags: KILL_ON_JOB_CLOSE | BREAKAWAY_OK })).toBe(KILL_ON_JOB_CLOSE | BREAKAWAY_OK);
  });

  it('is kept in a job that does not kill on close, or lets members break away silently (a Node parent\'s own job)', () => {
    expect(leaseBlockingJob({ inJob: true, limitFlags: 0 })).toBeUndefined();
    expect(leaseBlockingJob({ inJob: true, limitFlags: BREAKAWAY_OK })).toBeUndefined();
    // libuv's job for the children of a Node process: kill-on-close, silent breakaway.
    expect(leaseBlockingJob({ inJob: true, limitFlags: KILL_ON_JOB_CLOSE | SILENT_BREAKAWAY_OK | DIE_ON_UNHANDLED_EXCEPTION })).toBeUndefined();
  });

  it('is refused with ERR_CORDON_LEASE_JOB, which names the flags and what to do', () => {
    const err = leaseJobBound(KILL_ON_JOB_CLOSE);
    expect(err.code).toBe('ERR_CORDON_LEASE_JOB');
    expect(err.message).toMatch(/0x2000/);
    expect(err.message).toMatch(/outside that job|silent breakaway|without `lease`/);
  });
});
