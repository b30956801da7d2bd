// Where a leased anchor runs from on Windows. A leased anchor outlives its
// host, and Windows removes neither a running program's file nor a running
// process's working directory: started from the package
// (node_modules/cordon/build/Release) it would make `npm ci`, an upgrade or a
// removal of the project fail (EBUSY, EPERM) for as long as the leased tree
// lives. So it runs from a copy of this version's anchor, in
// %LOCALAPPDATA%\cordon\anchors\<first 32 hex digits of its SHA-256>\ (a
// directory of this user's alone, lease-dir.ts), and that directory is its
// working directory too (the command gets its own, --cwd).
import { randomBytes, createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { debug } from '../debug.js';
import { windowsPrivateDir } from '../private-dir.js';

/** The copies made or checked by this process: the package's anchor -> its copy. */
const copies = new Map<string, string>();

function digest(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * The copy of the anchor at `path` a leased tree runs from: made once per
 * content (so two versions' copies live side by side, and a copy in use is
 * never replaced), checked against the package's bytes the first time this
 * process uses it. A copy with other bytes under the right name (changed
 * since, or cut short) is replaced, or, while a process runs it, a new one
 * is written beside it under a name of its own. Copies of other versions are
 * removed where no process runs them. Where no copy can be made (no space,
 * no %LOCALAPPDATA%), the package's own anchor: the lease holds the same, only
 * the package cannot be replaced while the tree lives.
 */
export function leasedAnchorImage(path: string): string {
  const known = copies.get(path);
  if (known !== undefined && existsSync(known)) return known;
  try {
    const bytes = readFileSync(path);
    const hash = digest(bytes);
    const anchors = windowsPrivateDir('anchors', (dir, why) => new Error(`${dir} ${why}`));
    const dir = join(anchors, hash.slice(0, 32));
    const made = !existsSync(dir);
    if (made) windowsPrivateDir(join('anchors', basename(dir)), (d, why) => new Error(`${d} ${why}`));
    const image = join(dir, basename(path));
    const same = (() => {
      try {
        return statSync(image).size === bytes.length && digest(readFileSync(image)) === hash;
      } catch {
        return false;
      }
    })();
    let chosen = image;
    if (!same) {
      const fresh = join(dir, `${randomBytes(6).toString('hex')}-${basename(path)}`);
      writeFileSync(fresh, bytes, { flag: 'wx' });
      try {
        renameSync(fresh, image);
      } catch (err) {
        // (A process runs the copy there: the fresh one, under its own name.)
        debug('the anchor copy %s is in use (%s): running %s', image, (err as NodeJS.ErrnoException).code, fresh);
        chosen = fresh;
      }
    }
    if (made) removeOtherVersions(anchors, basename(dir));
    copies.set(path, chosen);
    return chosen;
  } catch (err) {
    debug('no copy of the anchor for a leased tree (%s): it runs from the package', (err as Error).message);
    return path;
  }
}

/**
 * Removes the copies of other anchors that no process runs (Windows refuses
 * to remove those). A host of another version checks its copy is there right
 * before it starts it (leasedAnchorImage: made again if gone); one removed in
 * the moment between that check and the start fails that start with ENOENT
 * (a typed launch failure: nothing ran).
 */
function removeOtherVersions(anchors: string, keep: string): void {
  for (const name of readdirSync(anchors)) {
    if (name === keep) continue;
    try {
      rmSync(join(anchors, name), { recursive: true });
    } catch (err) {
      debug('the anchor copy %s stays (%s)', name, (err as NodeJS.ErrnoException).code);
    }
  }
}
