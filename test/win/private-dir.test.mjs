// Private directories on Windows (lib/private-dir.ts): this user's log
// directory, %LOCALAPPDATA%\cordon\logs (not %TEMP%), and an owner's
// directory in a Registry's logDir are made with a DACL of this user alone
// and checked from their own security descriptor, read by the addon without
// following a link (owner, DACL, reparse point); one made or planted before
// cordon (a folder whose DACL admits others, a link) is refused with
// ERR_CORDON_LOG_DIR and never written into. Under Wine 8 (measured): a DACL
// is not stored but derived from the Unix mode, so a folder made with
// mkdirSync reads as open to Everyone (S-1-1-0) and is refused as such;
// junctions cannot be made (ENOTSUP), and a directory symlink is reported
// made but is not there: the link test is skipped there. A directory owned
// by another user cannot be made (one Unix user). The decision on each of
// those, from what the addon reads, is test/private-dir-windows.test.ts's.
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { assertUserOnlyDacl, join, noDaclExe, pkgDir, track, underWine } from './helpers.mjs';

const dist = (name) => import(pathToFileURL(join(pkgDir, 'dist', name)).href);
const { defaultLogDir, ownerLogDir } = await dist('log-file.js');
const { windowsDirProblem } = await dist('private-dir.js');
const { windowsBinding } = await dist('native.js');

/** A fresh %LOCALAPPDATA% for this test (restored and removed after it). */
function freshLocalAppData(ctx) {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-lad-'));
  const before = process.env.LOCALAPPDATA;
  process.env.LOCALAPPDATA = dir;
  ctx.after(() => {
    if (before === undefined) delete process.env.LOCALAPPDATA;
    else process.env.LOCALAPPDATA = before;
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

// proves nothing of the contract: the threat model's private log directory (no clause)
test('log directory: %LOCALAPPDATA%\\cordon\\logs, made with a DACL for this user alone; made again, it is accepted as it is', async (ctx) => {
  const base = freshLocalAppData(ctx);
  const dir = defaultLogDir();
  assert.equal(dir, join(base, 'cordon', 'logs'));
  const facts = windowsBinding().privateDirFacts(dir);
  ctx.diagnostic(`read by the addon: ${JSON.stringify(facts)}`);
  assert.equal(facts.owner, 'self');
  assert.equal(windowsDirProblem(facts), undefined);
  // (Wine keeps no security descriptor of a file: it reads back SYSTEM and the user, unprotected, whatever was given.)
  const outside = noDaclExe || (underWine && 'Wine reads back a default DACL, not the one CreateDirectory was given');
  if (!outside) await assertUserOnlyDacl(ctx, track(ctx), ['--dir', dir]);
  else ctx.diagnostic(`DACL not read from outside: ${outside}`);
  assert.equal(defaultLogDir(), dir, 'the second call takes the directory the first made');
});

// proves nothing of the contract: the threat model's private log directory (no clause)
test('log directory: a folder made before cordon, open to other users (its DACL), is refused with ERR_CORDON_LOG_DIR and left as it is', (ctx) => {
  const base = freshLocalAppData(ctx);
  const planted = join(base, 'cordon', 'logs');
  mkdirSync(planted, { recursive: true });
  const facts = windowsBinding().privateDirFacts(planted);
  ctx.diagnostic(`the planted folder, read by the addon: ${JSON.stringify(facts)}`);
  assert.throws(() => defaultLogDir(), (err) => {
    assert.equal(err.code, 'ERR_CORDON_LOG_DIR');
    assert.equal(err.path, planted);
    assert.match(err.message, /admits .+ besides this user/);
    assert.match(err.message, /Remove it/);
    return true;
  });
  assert.deepEqual(readdirSync(planted), [], 'nothing was written into it');
});

// proves nothing of the contract: the threat model's private log directory (no clause)
test('log directory: a link planted where it goes is refused with ERR_CORDON_LOG_DIR, nothing is written through it', (ctx) => {
  const base = freshLocalAppData(ctx);
  const target = mkdtempSync(join(tmpdir(), 'cordon-target-'));
  ctx.after(() => rmSync(target, { recursive: true, force: true }));
  mkdirSync(join(base, 'cordon'));
  const planted = join(base, 'cordon', 'logs');
  let made;
  for (const type of ['junction', 'dir']) {
    try {
      symlinkSync(target, planted, type);
    } catch (err) {
      ctx.diagnostic(`a ${type} cannot be made here: ${err.code}`);
      continue;
    }
    // (Wine 8's CreateSymbolicLinkW reports success and makes nothing.)
    if (existsSync(planted) && lstatSync(planted).isSymbolicLink()) {
      made = type;
      break;
    }
    ctx.diagnostic(`a ${type} was reported made, but there is none`);
    rmSync(planted, { recursive: true, force: true });
  }
  if (!made) return ctx.skip('neither a junction nor a directory symlink can be made here (Wine 8: junctions ENOTSUP, a directory symlink reported made but absent); the decision on a reparse point is test/private-dir-windows.test.ts\'s');
  ctx.diagnostic(`planted a ${made}`);
  assert.throws(() => defaultLogDir(), (err) => {
    assert.equal(err.code, 'ERR_CORDON_LOG_DIR');
    ctx.diagnostic(err.message);
    return true;
  });
  assert.deepEqual(readdirSync(target), [], 'nothing was written through the link');
});

// proves nothing of the contract: the threat model's private log directory (no clause)
test("log directory: an owner's directory in a Registry's logDir is made private, and one planted there open to others is refused", (ctx) => {
  const logDir = mkdtempSync(join(tmpdir(), 'cordon-logdir-'));
  ctx.after(() => rmSync(logDir, { recursive: true, force: true }));
  const dir = ownerLogDir(logDir, 'tenant-a');
  assert.equal(windowsDirProblem(windowsBinding().privateDirFacts(dir)), undefined);
  mkdirSync(join(logDir, 'tenant-b'));
  assert.throws(() => ownerLogDir(logDir, 'tenant-b'), { code: 'ERR_CORDON_LOG_DIR' });
});
