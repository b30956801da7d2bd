// The host's reading of the anchor line protocol (lib/anchor/protocol.ts):
// pure, no processes. Each verb as the anchors print it (native/posix/anchor.cc,
// native/win/control.cc); what the host cannot read is a typed result.
import { describe, expect, it } from 'vitest';
import { encodeCommand, parseAnswer, parseLine, splitLines } from '../lib/anchor/protocol.js';

describe('anchor protocol: lines from the anchor', () => {
  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it('reads every verb', () => {
    expect(parseLine('GROUP 4242')).toEqual({ type: 'group', pgid: 4242 });
    expect(parseLine('MARKER 123.4567.0123456789abcdef0123456789abcdef 123')).toEqual({ type: 'marker', token: '123.4567.0123456789abcdef0123456789abcdef', session: 123 });
    expect(parseLine('MARKER 123.4567.0123456789abcdef0123456789abcdef 0')).toEqual({ type: 'marker', token: '123.4567.0123456789abcdef0123456789abcdef', session: 0 });
    // A token that is not <pid>.<start>.<32 hex> is never swept for.
    for (const bad of ['MARKER 1.2.xyz 0', 'MARKER 123.4567.0123456789abcdef0123456789abcdef0 0', 'MARKER', 'MARKER 123.4567.0123456789abcdef0123456789abcdef']) expect(parseLine(bad).type, bad).toBe('malformed');
    expect(parseLine('READY 100 subreaper 1')).toEqual({ type: 'ready', pid: 100, tier: 'subreaper', pidfd: true });
    expect(parseLine('READY 100 process-group 0')).toEqual({ type: 'ready', pid: 100, tier: 'process-group', pidfd: false });
    expect(parseLine('NOCONTAIN 1 cgroup')).toEqual({ type: 'noContain', errno: 1, what: 'cgroup' });
    expect(parseLine('EXECFAIL 2')).toEqual({ type: 'execFail', errno: 2 });
    expect(parseLine('NOCWD 20')).toEqual({ type: 'noCwd', errno: 20 });
    expect(parseLine('LEFT 7 1 sleep 300')).toEqual({ type: 'left', pid: 7, heldOutput: true, command: 'sleep 300' });
    expect(parseLine('LEFT 7 0 ')).toEqual({ type: 'left', pid: 7, heldOutput: false, command: '' });
    expect(parseLine('LEFTEND')).toEqual({ type: 'leftEnd' });
    expect(parseLine('LEFTGROUP 9 sh -c daemon')).toEqual({ type: 'leftGroup', pid: 9, command: 'sh -c daemon' });
    expect(parseLine('RELEASED')).toEqual({ type: 'released' });
    expect(parseLine('STUCK 5:D 6:?')).toEqual({ type: 'stuck', pids: [5, 6], states: ['D', '?'] });
    expect(parseLine('STUCK')).toEqual({ type: 'stuck', pids: [], states: [] });
    expect(parseLine('STUCK 5')).toMatchObject({ type: 'malformed' });
    expect(parseLine('QUIET')).toEqual({ type: 'quiescent' });
  });

  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it('LIMITS, LIMITDIR and USAGE (resource limits: what is enforced, where, and what the tree used; -1 is "not measured")', () => {
    expect(parseLine('LIMITS 67108864 20 50000 v1')).toEqual({ type: 'limits', memory: 67108864, processes: 20, cpuQuotaUs: 50000, how: 'v1' });
    expect(parseLine('LIMITS 0 0 0 none')).toEqual({ type: 'limits', memory: 0, processes: 0, cpuQuotaUs: 0, how: 'none' });
    expect(parseLine('LIMITDIR /sys/fs/cgroup/pids/a b/cordon-1-ab')).toEqual({ type: 'limitDir', dir: '/sys/fs/cgroup/pids/a b/cordon-1-ab' });
    expect(parseLine('LIMITDIR relative')).toMatchObject({ type: 'malformed' });
    expect(parseLine('USAGE 1500 -1 20 0 3')).toEqual({ type: 'usage', cpuUs: 1500, memoryPeak: null, processesPeak: 20, oomKills: 0, pidsMaxHits: 3 });
    expect(parseLine('USAGE 1500 x')).toMatchObject({ type: 'malformed', reason: expect.stringContaining('memory peak') });
  });

  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it('the LEASE command (a leased tree, issue #17)', () => {
    expect(encodeCommand({ type: 'lease', ms: 600000, token: '0123456789abcdef0123456789abcdef' })).toBe('LEASE 600000 0123456789abcdef0123456789abcdef\n');
  });

  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it('READY of the cgroup tier names its cgroup, spaces and all', () => {
    expect(parseLine('READY 100 cgroup 1 /sys/fs/cgroup/a b/cordon-1')).toEqual({
      type: 'ready',
      pid: 100,
      tier: 'cgroup',
      pidfd: true,
      cgroup: '/sys/fs/cgroup/a b/cordon-1',
    });
  });

  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it('EXIT: a code, or a signal; -1 and 0 say "none"', () => {
    expect(parseLine('EXIT 3 0')).toEqual({ type: 'exit', code: 3, signal: null });
    expect(parseLine('EXIT -1 9')).toEqual({ type: 'exit', code: null, signal: 9 });
    expect(parseLine('EXIT 0 0')).toEqual({ type: 'exit', code: 0, signal: null });
  });

  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it("command lines come unescaped (the anchors escape \\, LF and CR)", () => {
    expect(parseLine('LEFT 7 0 printf a\\nb\\rc\\\\d')).toEqual({ type: 'left', pid: 7, heldOutput: false, command: 'printf a\nb\rc\\d' });
    expect(parseLine('LEFTGROUP 9 x\\\\n')).toEqual({ type: 'leftGroup', pid: 9, command: 'x\\n' });
  });

  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it('an unknown verb is a typed result, not an exception', () => {
    expect(parseLine('HELLO 1 2')).toEqual({ type: 'unknown', line: 'HELLO 1 2' });
    expect(parseLine('')).toEqual({ type: 'unknown', line: '' });
    expect(parseLine('quiet')).toEqual({ type: 'unknown', line: 'quiet' });
  });

  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it('a known verb whose numbers cannot be read is malformed, and says which field', () => {
    for (const line of ['READY x subreaper 1', 'READY', 'EXIT 1', 'EXIT a 0', 'GROUP', 'LEFT one 1 sh', 'STUCK 1:x 2', 'NOCONTAIN', 'EXECFAIL 1.5']) {
      const r = parseLine(line);
      expect(r.type, line).toBe('malformed');
      expect(r, line).toMatchObject({ line, reason: expect.stringMatching(/is not an integer/) });
    }
  });

  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it('splits what arrived into whole lines and keeps the unfinished one', () => {
    expect(splitLines('READY 1 subreaper 1\nEXIT 0 0\nQUI')).toEqual({ lines: ['READY 1 subreaper 1', 'EXIT 0 0'], rest: 'QUI' });
    expect(splitLines('QUIET\n')).toEqual({ lines: ['QUIET'], rest: '' });
    expect(splitLines('')).toEqual({ lines: [], rest: '' });
  });
});

describe('anchor protocol: commands from the host', () => {
  // proves nothing of the contract: a pure parser of the anchor's protocol, no process
  it('writes TERM with its grace, KILL, and JOB with the handle value', () => {
    expect(encodeCommand({ type: 'term', graceMs: 3000 })).toBe('TERM 3000\n');
    expect(encodeCommand({ type: 'term', graceMs: 0 })).toBe('TERM 0\n');
    expect(encodeCommand({ type: 'kill' })).toBe('KILL\n');
    expect(encodeCommand({ type: 'resize', cols: 120, rows: 40 })).toBe('RESIZE 120 40\n');
    // ADOPTED: a terminal's tree says so last (its input's pipe comes with it); an anchor from before terminals does not.
    expect(parseAnswer('ADOPTED /tmp/a b.log 1 0 terminal')).toEqual({ type: 'adopted', logPath: '/tmp/a b.log', streams: { stdout: true, stderr: false }, terminal: true });
    expect(parseAnswer('ADOPTED - 1 1')).toEqual({ type: 'adopted', logPath: null, streams: { stdout: true, stderr: true }, terminal: false });
    expect(encodeCommand({ type: 'job', handle: 1234 })).toBe('JOB 1234\n');
  });
});
