// Windows: whether a leased tree can outlive its host is the leased anchor's
// to say, once started, from the Job Object it landed in (native/win/lease.h):
// NOCONTAIN <errno> lease-job <LimitFlags>, which the host turns into
// ERR_CORDON_LEASE_JOB. Here, on any platform: the line as the host reads it
// and the error it becomes. The anchor's decision, in a real job chain made
// by test/win/fixtures/in-job.cc around a host that spawned before leasing,
// is in test/win/lease.test.mjs.
import { describe, expect, it } from 'vitest';
import { parseLine } from '../lib/anchor/protocol.js';
import { leaseJobBound } from '../lib/errors.js';

const KILL_ON_JOB_CLOSE = 0x2000;

describe("Windows: a lease refused by the anchor's Job Object", () => {
  // proves nothing of the contract: the host's reading of an anchor's refusal line, pure
  it("the anchor's refusal carries the job's LimitFlags; other refusals carry nothing more", () => {
    expect(parseLine('NOCONTAIN 1 lease-job 2000')).toEqual({ type: 'noContain', errno: 1, what: 'lease-job', detail: '2000' });
    expect(parseLine('NOCONTAIN 13 job-object')).toEqual({ type: 'noContain', errno: 13, what: 'job-object' });
  });

  // proves nothing of the contract: the error made of an anchor's refusal line, pure
  it('is ERR_CORDON_LEASE_JOB (nothing ran), which names the flags and what to do', () => {
    const err = leaseJobBound(KILL_ON_JOB_CLOSE);
    expect(err.code).toBe('ERR_CORDON_LEASE_JOB');
    expect(err.stage).toBe('launch');
    expect(err.message).toMatch(/LimitFlags 0x2000: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE/);
    expect(err.message).toMatch(/Run the host outside that job/);
    expect(err.message).toMatch(/silent breakaway/);
    expect(err.message).toMatch(/or spawn without `lease`\. Nothing ran\./);
    // Flags the line did not carry are not made up.
    expect(leaseJobBound(Number.NaN).message).not.toMatch(/NaN|LimitFlags/);
  });
});
