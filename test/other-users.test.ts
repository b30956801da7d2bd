// Another user against this user's logs and leases. The test runs as root;
// the other user is nobody (65534), acting through runuser, in a world of the
// test's own: a temporary directory open to everyone (mode 1777, as /tmp is)
// that is the hosts' TMPDIR, and a private HOME. Observed from outside: what
// nobody can read, what lands in the places nobody made, what nobody's socket
// receives.
//   - Logs: cordon's own log directory and files are this user's alone (0700,
//     0600), unreadable to nobody; a directory nobody made first at
//     cordon's place is bypassed for <home>/.cordon/logs and never written
//     into; an owner directory nobody planted in a host's logDir is refused.
//   - Leases: a lease directory nobody made first is bypassed for
//     <home>/.cordon/leases, where every host of the user finds the trees.
//   - A record planted beside a tree's, naming nobody's live socket as its
//     endpoint, never sends that socket anything: the endpoint is derived
//     from the directory and the tree's id.
import { spawn as spawnChild, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, onTestFinished } from 'vitest';
import { Registry } from '../lib/index.js';
import { posixLeaseDir } from '../lib/anchor/lease-dir.js';
import { binding } from '../lib/native.js';
import { capture } from './helpers/fixtures.js';
import { ensureDist, startHost } from './helpers/host.js';
import { adopter, hostEnded, killHost, spawnLeased, TICKER } from './helpers/lease.js';
import { pollUntil } from './helpers/common.mjs';
import { useTag, waitGone, within, type Tagged } from './helpers/procs.js';
import { missing, runuserPath } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';
import { watchdog } from './helpers/time.js';

const isRoot = process.getuid?.() === 0;
const why = !isRoot ? 'needs a root test runner to act as another user' : (missing('runuser', 'nobody') ?? '');
const runuser = runuserPath();

/** Whether a user with no rights of owner or group can execute `path` (and search every directory above it). */
function othersCanRun(path: string): boolean {
  let p = realpathSync(path);
  if ((statSync(p).mode & 0o005) !== 0o005) return false;
  for (p = dirname(p); ; p = dirname(p)) {
    if (!(statSync(p).mode & 0o001)) return false;
    if (p === dirname(p)) return true;
  }
}

/** Runs `script` (sh -c) as nobody, bounded: its status and stdout. `vars` are exported to it. */
function asNobody(t: Tagged, script: string, vars: Record<string, string> = {}): { status: number | null; stdout: string } {
  const r = spawnSync(runuser!, ['-u', 'nobody', '--', 'sh', '-c', script], { env: { ...t.env, ...vars }, encoding: 'utf8', timeout: watchdog(10_000) });
  return { status: r.status, stdout: (r.stdout ?? '').trim() };
}

interface World {
  /** The hosts' TMPDIR, mode 1777. */
  dir: string;
  /** The hosts' HOME, root's alone. */
  home: string;
  /** The hosts' environment: the test's tag, TMPDIR and HOME, no XDG_RUNTIME_DIR. */
  env: NodeJS.ProcessEnv;
}

function useWorld(t: Tagged): World {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-users-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  chmodSync(dir, 0o1777);
  const home = join(dir, 'home');
  mkdirSync(home, { mode: 0o700 });
  const env: NodeJS.ProcessEnv = { ...t.env, TMPDIR: dir, HOME: home };
  delete env.XDG_RUNTIME_DIR;
  return { dir, home, env };
}

/** Makes the world the test process's own (TMPDIR, HOME, no XDG_RUNTIME_DIR), restored when the test finishes. */
function enterWorld(w: World): void {
  const saved = { TMPDIR: process.env.TMPDIR, HOME: process.env.HOME, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR };
  onTestFinished(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  process.env.TMPDIR = w.dir;
  process.env.HOME = w.home;
  delete process.env.XDG_RUNTIME_DIR;
}

function mode(path: string): string {
  return (statSync(path).mode & 0o7777).toString(8);
}

/** What nobody gets from reading the log and listing its directory: 'done' alone when it gets nothing. */
function nobodyReads(t: Tagged, log: string): string {
  return asNobody(t, 'if cat "$LOG" >/dev/null 2>&1; then echo read; fi; if ls "$(dirname "$LOG")" >/dev/null 2>&1; then echo listed; fi; echo done', { LOG: log }).stdout;
}

/** A leased tree (the host SIGKILLed) whose output holds a secret; ended by an adopter at the end of the test. */
async function leasedWithSecret(t: Tagged, env: NodeJS.ProcessEnv) {
  const l = await spawnLeased(env, 60_000, 300, `echo "secret-$$"; ${TICKER}`);
  await killHost(l.host, t);
  await pollUntil(() => existsSync(l.log) && readFileSync(l.log, 'utf8').includes('secret-'), watchdog(10_000), 20);
  expect(readFileSync(l.log, 'utf8'), 'the log holds the secret').toMatch(/secret-\d+/);
  return l;
}

async function endLeased(t: Tagged, env: NodeJS.ProcessEnv, l: { id: string; token: string }): Promise<void> {
  const a = adopter(env, l.id, l.token, 'terminate');
  expect((await within(a.exited, watchdog(15_000), 'the adopter to end the tree', t.tag)).code, a.out.text + a.err.text).toBe(0);
  await waitGone(t, 2000);
}

describe('another user (nobody) against logs and leases', () => {
  beforeAll(async () => {
    if (why === '') await ensureDist();
  });

  // proves nothing of the contract: the threat model's private logs (no clause)
  itWhere(why === '', "a leased tree's log and its directory are this user's alone: nobody can neither read the log nor list its directory", why, async () => {
    const t = useTag();
    const w = useWorld(t);
    const l = await leasedWithSecret(t, w.env);
    expect(nobodyReads(t, l.log), `as nobody: ${l.log}`).toBe('done');
    const base = join(w.dir, 'cordon-logs-0');
    expect(l.log.startsWith(join(base, 'alice') + '/'), l.log).toBe(true);
    expect([mode(base), mode(dirname(l.log)), mode(l.log)]).toEqual(['700', '700', '600']);
    await endLeased(t, w.env, l);
  });

  // proves nothing of the contract: the threat model's private logs (no clause)
  itWhere(why === '', "log directories nobody made first at cordon's places are bypassed for <home>/.cordon/logs and never written into", why, async () => {
    const t = useTag();
    const w = useWorld(t);
    // Both the name of this user's log directory and the older shared one, open to all, one with a link inside.
    const planted = asNobody(t, 'mkdir -m 777 "$W/cordon-logs" "$W/cordon-logs-0" && ln -s /nonexistent "$W/cordon-logs-0/alice" && echo planted', { W: w.dir });
    expect(planted.stdout).toBe('planted');
    const l = await leasedWithSecret(t, w.env);
    expect(readdirSync(join(w.dir, 'cordon-logs')), 'nothing written into the planted directory').toEqual([]);
    expect(readdirSync(join(w.dir, 'cordon-logs-0')), 'nothing written into the planted directory').toEqual(['alice']);
    expect(nobodyReads(t, l.log), `as nobody: ${l.log}`).toBe('done');
    expect(l.log.startsWith(join(w.home, '.cordon', 'logs', 'alice') + '/'), l.log).toBe(true);
    expect([mode(join(w.home, '.cordon')), mode(join(w.home, '.cordon', 'logs')), mode(dirname(l.log)), mode(l.log)]).toEqual(['700', '700', '700', '600']);
    await endLeased(t, w.env, l);
  });

  // proves nothing of the contract: the threat model's private logs (no clause)
  itWhere(why === '', "a host's logDir open to all: an owner directory nobody planted there (a directory, a link) is refused before anything runs; one cordon makes is private", why, async () => {
    const t = useTag();
    const w = useWorld(t);
    const shared = join(w.dir, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const planted = asNobody(t, 'mkdir -m 777 "$S/alice" "$S/theirs" && ln -s "$S/theirs" "$S/bob" && echo planted', { S: shared });
    expect(planted.stdout).toBe('planted');
    const registry = new Registry({ logDir: shared });
    const mark = join(w.dir, 'ran');
    for (const owner of ['alice', 'bob']) {
      expect(() => registry.owner(owner).spawn('sh', ['-c', 'echo secret; echo ran > "$MARK"'], { log: true, env: { ...t.env, MARK: mark } }), owner).toThrow(
        expect.objectContaining({ code: 'ERR_CORDON_LOG_DIR' }),
      );
    }
    expect(existsSync(mark), 'nothing ran').toBe(false);
    expect(readdirSync(join(shared, 'alice'))).toEqual([]);
    expect(readdirSync(join(shared, 'theirs'))).toEqual([]);
    // An owner whose directory cordon makes itself: 0700, the file 0600, unreadable to nobody.
    const proc = registry.owner('carol').spawn('sh', ['-c', 'echo secret'], { log: true, env: t.env });
    const result = await within(proc.result, watchdog(10_000), 'the logged command', t.tag);
    expect(result.exitCode).toBe(0);
    expect(readFileSync(proc.logPath!, 'utf8')).toBe('secret\n');
    expect([mode(join(shared, 'carol')), mode(proc.logPath!)]).toEqual(['700', '600']);
    expect(nobodyReads(t, proc.logPath!), 'as nobody').toBe('done');
  });

  // proves C8: a leased tree is still adoptable when its usual directory is squatted
  itWhere(why === '', 'a lease directory nobody made first (or linked) is bypassed for <home>/.cordon/leases: leasing, listing and adopting still work, nothing lands in it', why, async () => {
    const t = useTag();
    const w = useWorld(t);
    const planted = asNobody(t, 'mkdir -m 700 "$W/cordon-0" && echo planted', { W: w.dir });
    expect(planted.stdout).toBe('planted');
    const l = await spawnLeased(w.env, 60_000, 300);
    const fallback = join(w.home, '.cordon', 'leases');
    expect(existsSync(join(fallback, `${l.id}.json`)), 'the record in the fallback').toBe(true);
    expect(existsSync(join(fallback, `${l.id}.sock`)), 'the endpoint in the fallback').toBe(true);
    expect(mode(fallback)).toBe('700');
    expect(readdirSync(join(w.dir, 'cordon-0')), 'nothing in the planted directory').toEqual([]);
    await killHost(l.host, t);
    // Another host of this user finds it there.
    const list = startHost(['list'], w.env, 'lease-host.mjs');
    hostEnded(list);
    expect((await within(list.exited, watchdog(20_000), 'registry.adoptable() in another host', t.tag)).code, list.err.text).toBe(0);
    expect(JSON.parse(/^LIST (.*)$/m.exec(list.out.text)![1]!)).toEqual([expect.objectContaining({ id: l.id, answered: true, rootRunning: true })]);
    await endLeased(t, w.env, l);

    // A link nobody planted at the place is bypassed the same way.
    const w2 = useWorld(t);
    expect(asNobody(t, 'mkdir -m 700 "$W/theirs" && ln -s "$W/theirs" "$W/cordon-0" && echo planted', { W: w2.dir }).stdout).toBe('planted');
    enterWorld(w2);
    expect(posixLeaseDir()).toBe(join(w2.home, '.cordon', 'leases'));
    expect(readdirSync(join(w2.dir, 'theirs'))).toEqual([]);
  });

  const nodeForNobody = why === '' && othersCanRun(process.execPath);
  // proves nothing of the contract: the threat model's token sent only to the anchor (no clause)
  itWhere(
    nodeForNobody,
    "a record planted beside a tree's, naming nobody's live socket as the endpoint: adoptable() and adopt() never connect to it",
    why || `nobody cannot run ${process.execPath} (a directory above it is not searchable by others)`,
    async () => {
      const t = useTag();
      const w = useWorld(t);
      const l = await spawnLeased(w.env, 60_000, 300);
      await killHost(l.host, t);
      // nobody's socket, in nobody's directory, writing down whatever reaches it.
      const evil = join(w.dir, 'evil');
      expect(asNobody(t, 'mkdir -m 755 "$E" && echo made', { E: evil }).stdout).toBe('made');
      const sock = join(evil, 'listen.sock');
      const heard = join(evil, 'heard');
      const listenerScript = `const fs = require('fs'); require('net').createServer((c) => { fs.appendFileSync(process.argv[2], 'CONNECTED\\n'); c.on('data', (d) => fs.appendFileSync(process.argv[2], d)); }).listen(process.argv[1], () => console.log('LISTENING ' + process.pid));`;
      // (runuser waits for the node it starts: both are ended by pid here, and carry the tag.)
      const listener = spawnChild(runuser!, ['-u', 'nobody', '--', process.execPath, '-e', listenerScript, sock, heard], { env: t.env, stdio: ['ignore', 'pipe', 'pipe'] });
      let listenerPid: number | undefined;
      const endListener = () => {
        for (const pid of [listenerPid, listener.pid]) {
          try {
            if (pid !== undefined) process.kill(pid, 'SIGKILL');
          } catch {}
        }
      };
      onTestFinished(endListener);
      const said = capture(listener.stdout);
      await said.until(/^LISTENING \d+$/m, watchdog(15_000));
      listenerPid = Number(/^LISTENING (\d+)$/m.exec(said.text)![1]);

      const leaseDir = join(w.dir, 'cordon-0');
      const recordPath = join(leaseDir, `${l.id}.json`);
      const record = JSON.parse(readFileSync(recordPath, 'utf8'));
      // The tree's own record, rewritten to name nobody's socket.
      writeFileSync(recordPath, JSON.stringify({ ...record, endpoint: sock }));
      // And a record of a live process (nobody's listener: pid and start time) with no endpoint of its own.
      const plantedId = `${listenerPid}-0123456789abcdef`;
      writeFileSync(join(leaseDir, `${plantedId}.json`), JSON.stringify({ ...record, id: plantedId, anchorPid: listenerPid, anchorStart: binding().processStart(listenerPid), endpoint: sock }));

      enterWorld(w);
      const registry = new Registry();
      const listed = await within(registry.adoptable(), watchdog(20_000), 'adoptable()', t.tag);
      const refused = await within(registry.adopt(plantedId, { token: l.token }).then(() => undefined, (err: Error & { code?: string }) => err.code), watchdog(20_000), 'adopt() of the planted record', t.tag);
      const adopted = await within(registry.adopt(l.id, { token: l.token }).then((proc) => proc, (err: Error) => err), watchdog(20_000), 'adopt() of the tree', t.tag);
      if (!(adopted instanceof Error)) onTestFinished(() => void adopted.kill().catch(() => {}));
      // What nobody's socket heard, first: the token must never have reached it.
      expect(existsSync(heard) ? readFileSync(heard, 'utf8') : '', "what nobody's socket received").toBe('');
      expect(listed.find((e) => e.id === l.id), 'the tree, asked at its own endpoint').toMatchObject({ answered: true, rootRunning: true });
      expect(refused, 'the planted record, whose endpoint (derived) does not exist').toMatch(/^ERR_CORDON_/);
      if (adopted instanceof Error) throw adopted;
      await within(adopted.terminate({ grace: 300 }), watchdog(10_000), 'terminate() of the adopted tree', t.tag);
      endListener();
      await waitGone(t, 2000);
    },
  );
});
