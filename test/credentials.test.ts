// uid/gid (issue #16): the command, never the anchor, runs as the given user
// and group, and stays contained. Observed from outside, through the observer
// (/proc/<pid>/status, or ps: ruid, uid, svuid, rgid, gid, svgid; procps adds
// the filesystem ids and the supplementary groups, which macOS ps does not
// show) of the root, its child and the anchor. nobody is the system's own
// (`id -u nobody`: requirements.ts), never a constant.
import { realpathSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { spawn } from '../lib/index.js';
import { credentialOption } from '../lib/credentials.js';
import { capture } from './helpers/fixtures.js';
import { alive, useTag, waitGone, within } from './helpers/procs.js';
import { observer } from './helpers/observer.js';
import { missing, nobodyIds } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';

const isRoot = process.getuid?.() === 0;
/** Why the command cannot run as nobody here, or in nobody's group ('' where it can). */
const asNobodyWhy = !isRoot ? 'needs a root host to change user' : (missing('nobody') ?? '');
const inNobodysGroupWhy = !isRoot ? 'needs a root host to change group' : (missing('nobody') ?? '');
/** nobody's uid and gid on this system (only read where the tests that use them run). */
const NOBODY = asNobodyWhy === '' ? nobodyIds()! : { uid: -1, gid: -1 };
/** How many ids of each kind the observer shows: real, effective, saved, and on Linux the filesystem id. */
const KINDS = process.platform === 'linux' ? 4 : 3;

/** The process's ids through the observer: all of them, the supplementary groups where it shows them. */
function ids(pid: number): { uid: number[]; gid: number[]; groups: number[] | undefined } {
  const c = observer.credentials(pid);
  if (!c) throw new Error(`pid ${pid} is gone: no ids to read`);
  expect(c.uid.length, `pid ${pid}: the observer shows ${KINDS} uids`).toBe(KINDS);
  expect(c.gid.length, `pid ${pid}: the observer shows ${KINDS} gids`).toBe(KINDS);
  return c;
}

/**
 * Whether a user with no rights of owner or group can reach `path` (search
 * every directory above it) and read it, and execute it when asked: the
 * nobody host must run this Node and import this checkout's dist/. Node
 * installed under /root (a version manager's cache, as in CI's second lane)
 * is out of nobody's reach.
 */
function othersCanUse(path: string, execute: boolean): boolean {
  let p = realpathSync(path);
  const own = statSync(p).mode;
  if (!(own & 0o004) || (execute && !(own & 0o001))) return false;
  for (p = dirname(p); ; p = dirname(p)) {
    if (!(statSync(p).mode & 0o001)) return false;
    if (p === dirname(p)) return true;
  }
}
const distIndex = fileURLToPath(new URL('../dist/index.js', import.meta.url));
const nobodyCanHost = asNobodyWhy === '' && othersCanUse(process.execPath, true) && othersCanUse(distIndex, false);

describe('uid and gid', () => {
  // proves C3: a tree run as another user still ends
  itWhere(asNobodyWhy === '', 'the root and its child run as nobody; the anchor stays root; terminate() still ends the tree', asNobodyWhy, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'sleep 300 & echo "PID child $!"; echo "PID root $$"; exec sleep 300'], {
      env: t.env,
      uid: NOBODY.uid,
      gid: NOBODY.gid,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const out = capture(proc.stdout);
    await within(out.until(/PID root \d+/), 10_000, 'the root to start', t.tag);
    const pids = out.pids();
    for (const name of ['root', 'child']) {
      const got = ids(pids[name]!);
      expect(got.uid, `${name}'s uids`).toEqual(Array(KINDS).fill(NOBODY.uid));
      expect(got.gid, `${name}'s gids`).toEqual(Array(KINDS).fill(NOBODY.gid));
      // macOS ps does not show them (observer.credentials: undefined).
      if (got.groups !== undefined || process.platform === 'linux') expect(got.groups, `${name}'s supplementary groups`).toEqual([]);
    }
    expect(ids(proc.anchorPid!).uid[0], 'the anchor keeps the host\'s user').toBe(0);
    await within(proc.terminate({ grace: 1000 }), 10_000, 'terminate', t.tag);
    expect(alive(pids.root!)).toBe(false);
    expect(alive(pids.child!)).toBe(false);
    await waitGone(t, 5_000);
  });

  // proves nothing of the contract: the gid option
  itWhere(inNobodysGroupWhy === '', 'gid alone changes only the group', inNobodysGroupWhy, async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'echo "PID root $$"; exec sleep 300'], { env: t.env, gid: NOBODY.gid, stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    await within(out.until(/PID root \d+/), 10_000, 'the root to start', t.tag);
    const got = ids(out.pids().root!);
    expect(got.uid[0]).toBe(0);
    expect(got.gid[0]).toBe(NOBODY.gid);
    await within(proc.terminate({ grace: 0 }), 10_000, 'terminate', t.tag);
  });

  // proves C6: a launch failure, nothing ran
  itWhere(
    nobodyCanHost,
    'a drop the command cannot make: a nobody host asking for root is EPERM, a launch failure; nothing ran',
    !isRoot ? 'needs a root host to start the nobody host' : asNobodyWhy || `nobody cannot run ${process.execPath} or read ${distIndex} (a directory above them is not searchable by others)`,
    async () => {
    // The host itself runs as nobody (started through cordon as nobody), and asks for uid 0.
    const t = useTag();
    const script = `
      import('${new URL('../dist/index.js', import.meta.url).href}').then(async ({ spawn }) => {
        const p = spawn('sh', ['-c', 'echo RAN'], { uid: 0, tier: 'subreaper', stdio: ['ignore', 'pipe', 'ignore'] });
        p.stdout.on('data', (d) => process.stdout.write(d));
        try { await p.result; console.log('NO ERROR'); } catch (e) { console.log('ERR', e.code, e.stage, e.isLaunchFailure); }
      });`;
    const host = spawn(process.execPath, ['--input-type=module', '-e', script], { env: t.env, uid: NOBODY.uid, gid: NOBODY.gid, cwd: '/tmp' });
    const out = capture(host.stdout);
    const result = await within(host.result, 20_000, 'the nobody host', t.tag);
    expect(result.exitCode).toBe(0);
    expect(out.text).toBe('ERR EPERM launch true\n');
  });

  // proves nothing of the contract: the uid/gid options' input errors
  it('bad values are typed errors before anything runs; Windows has none', () => {
    const t = useTag();
    for (const [name, value, code] of [
      ['uid', -1, 'ERR_INVALID_ARG_VALUE'],
      ['uid', 1.5, 'ERR_INVALID_ARG_VALUE'],
      ['gid', 2 ** 31, 'ERR_INVALID_ARG_VALUE'],
      ['gid', '0', 'ERR_INVALID_ARG_TYPE'],
    ] as const) {
      expect(() => spawn('sh', ['-c', 'exit 0'], { env: t.env, [name]: value })).toThrow(expect.objectContaining({ code, stage: 'input' }));
    }
    expect(() => credentialOption('uid', 0, 'win32')).toThrow(expect.objectContaining({ code: 'ERR_CORDON_UNSUPPORTED' }));
    expect(t.procs()).toEqual([]);
  });
});
