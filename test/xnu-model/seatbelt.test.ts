// The confine option in the darwin build (native/darwin/confine.cc), on the
// model of XNU (.ci/darwin-model.sh). Seatbelt is not open source and the
// model does not pretend to be it: its sandbox_init (test/xnu-model/shim.cc)
// enforces nothing and records, per call, the caller's pid, its executable at
// the time of the call and the profile (docs/xnu-model.md). Checked from
// outside: the record's pid is the root's (the pid the command printed), its
// executable was the anchor's (so the profile was applied in the command's own
// process before exec, and the command ran after it), no other process applied
// one, and the profile is the text this file expects for the policy (this
// file's own copy of what docs/confine.md says, rule by rule). What Seatbelt
// then enforces on a Mac is not checked anywhere: test/confine.test.ts has the
// test a Mac would run.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { run, type CordonError, type ConfineNetwork } from '../../lib/index.js';
import { anchorPath } from '../../lib/native.js';
import { capabilities } from '../../lib/capabilities.js';
import { useTag, within } from '../helpers/procs.js';
import { watchdog } from '../helpers/time.js';

/** A fresh directory (canonical), removed after the test. */
function scratch(): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'cordon-seatbelt-')));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** An SBPL string literal: `"` and `\` escaped by a backslash. */
const literal = (path: string) => `"${path.replace(/["\\]/g, (c) => `\\${c}`)}"`;

/** The profile docs/confine.md describes for a policy (the anchor's write paths: `write`, then the tree's temp dir). */
function expectedProfile(write: string[], denyRead: string[], network: ConfineNetwork): string {
  return [
    '(version 1)',
    '(allow default)',
    '(deny file-write*)',
    ...write.map((w) => `(allow file-write* (subpath ${literal(w)}))`),
    '(allow file-write*',
    '  (literal "/dev/null")',
    '  (literal "/dev/zero")',
    '  (literal "/dev/random")',
    '  (literal "/dev/urandom")',
    '  (literal "/dev/tty")',
    '  (literal "/dev/ptmx")',
    '  (literal "/dev/dtracehelper")',
    '  (regex #"^/dev/ttys[0-9]+$")',
    '  (subpath "/dev/fd"))',
    ...denyRead.map((d) => `(deny file-read* process-exec (subpath ${literal(d)}))`),
    ...(network === 'all' ? [] : ['(deny network*)']),
    ...(network === 'loopback' ? ['(allow network-bind network-inbound (local ip "localhost:*"))', '(allow network-outbound (remote ip "localhost:*"))'] : []),
    '',
  ].join('\n');
}

/** The model's records under `logs` (file name -> { pid, exe, flags, profile }). */
function records(logs: string) {
  return readdirSync(logs).map((name) => {
    const text = readFileSync(join(logs, name), 'utf8');
    const at = text.indexOf('\n--\n');
    const head = Object.fromEntries(text.slice(0, at).split('\n').map((l) => [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)]));
    return { name, pid: Number(head.pid), exe: head.exe, flags: head.flags, profile: text.slice(at + 4) };
  });
}

/** A run whose model records land in a directory of its own. */
function logged(t: ReturnType<typeof useTag>, extra: Record<string, string> = {}) {
  const logs = join(scratch(), 'logs');
  mkdirSync(logs);
  return { logs, env: { ...t.env, CORDON_XNU_SANDBOX_LOG: join(logs, 'sb'), ...extra } };
}

describe("confine in the darwin build: the Seatbelt profile, applied in the command's own process before exec (the model records it, Seatbelt is not modelled)", () => {
  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('capabilities() says Seatbelt, and that it was never observed on a Mac', () => {
    const caps = capabilities({ tier: 'process-group' });
    expect(caps.guarantees.confine).toBe(true);
    expect(caps.notes.join('\n')).toMatch(/confine option \(a Seatbelt profile\).*never observed on a Mac/);
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it("network 'none', a denyRead path, a write path with a quote and a backslash: applied once, by the root's pid, while it was still the anchor's image; the profile is the policy's", async () => {
    const t = useTag();
    const dir = scratch();
    const out = join(dir, 'out');
    const odd = join(dir, 'we"ird\\) (allow file-write*');
    const secret = join(dir, 'secret');
    for (const d of [out, odd, secret]) mkdirSync(d);
    const { logs, env } = logged(t);
    const r = await within(run('sh', ['-c', 'echo "PID r $$"'], { env, confine: { write: [out, odd], denyRead: [secret], network: 'none' } }), watchdog(15_000), 'the confined run', t.tag);
    const pid = Number(/^PID r (\d+)$/m.exec(r.stdout)?.[1]);
    expect(pid, r.stdout).toBeGreaterThan(0);
    const recs = records(logs);
    expect(recs.map((x) => x.name)).toEqual([`sb.${pid}`]);
    expect(recs[0]).toMatchObject({ pid, exe: realpathSync(anchorPath()), flags: '0' });
    expect(recs[0]!.profile).toBe(expectedProfile([out, odd, r.confined!.tmpdir], [secret], 'none'));
    expect(r.confined).toMatchObject({ mechanism: 'seatbelt', landlockAbi: 0, network: 'none', denyRead: [secret] });
    expect(r.confined!.write).toEqual([out, odd, r.confined!.tmpdir]);
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it("network 'loopback' and 'all': the network rules follow the policy, nothing else changes", async () => {
    for (const network of ['loopback', 'all'] as const) {
      const t = useTag();
      const out = scratch();
      const { logs, env } = logged(t);
      const r = await within(run('sh', ['-c', 'echo "PID r $$"'], { env, confine: { write: [out], network } }), watchdog(15_000), 'the confined run', t.tag);
      const pid = Number(/^PID r (\d+)$/m.exec(r.stdout)?.[1]);
      const recs = records(logs);
      expect(recs.map((x) => x.pid), network).toEqual([pid]);
      expect(recs[0]!.profile, network).toBe(expectedProfile([out, r.confined!.tmpdir], [], network));
    }
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('sandbox_init refusing the profile: ERR_CORDON_CONTAINMENT (confine, launch), and the command never ran', async () => {
    const t = useTag();
    const out = scratch();
    const { logs, env } = logged(t, { CORDON_XNU_SANDBOX_REFUSE: '1' });
    const err = (await within(run('sh', ['-c', 'echo ran > "$1/ran"', 'sh', out], { env, confine: { write: [out] } }).catch((e: CordonError) => e), watchdog(15_000), 'the refused run', t.tag)) as CordonError;
    expect(err).toMatchObject({ code: 'ERR_CORDON_CONTAINMENT', syscall: 'confine', stage: 'launch', errno: -1 });
    expect(records(logs)).toHaveLength(1);
    expect(existsSync(join(out, 'ran'))).toBe(false);
  });

  // proves nothing of the contract: the confine option has no clause in docs/contract.md
  it('a path with a newline is refused before the fork (EINVAL): no profile applied, nothing ran', async () => {
    const t = useTag();
    const dir = scratch();
    const odd = join(dir, 'a\nb');
    mkdirSync(odd);
    const { logs, env } = logged(t);
    const err = (await within(run('sh', ['-c', 'echo ran > "$1/ran"', 'sh', dir], { env, confine: { write: [odd] } }).catch((e: CordonError) => e), watchdog(15_000), 'the refused run', t.tag)) as CordonError;
    expect(err).toMatchObject({ code: 'ERR_CORDON_CONTAINMENT', syscall: 'confine', stage: 'launch' });
    expect(err.errno).toBe(-22);
    expect(records(logs)).toHaveLength(0);
    expect(existsSync(join(dir, 'ran'))).toBe(false);
  });
});
