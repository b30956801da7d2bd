// The per-user lease directory: where leased trees are recorded (lease.ts)
// and, on Linux and macOS, where their anchors listen. Private to this user,
// or refused with a typed error: another user must not list or reach an
// endpoint, nor keep this user from leasing.
import { lstatSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leaseDirUnsafe } from '../errors.js';
import { homeFallback, privateDir, windowsPrivateDir } from '../private-dir.js';

/**
 * Linux and macOS: $XDG_RUNTIME_DIR/cordon when that is the user's, else
 * <tmpdir>/cordon-<uid>; made 0700. Where another user holds that place (it
 * made the directory first, or put a link or a file there), this user's own
 * <home>/.cordon/leases is used instead (lib/private-dir.ts): every process
 * of the user that finds the same squatter picks the same fallback, so
 * records and endpoints are still found. This user's own directory left
 * open to others (group or other permission bits), or a link of its own, is
 * refused (ERR_CORDON_LEASE_DIR), and so is a squatted place with no usable
 * home directory.
 */
export function posixLeaseDir(): string {
  const uid = process.getuid?.() ?? 0;
  const xdg = process.env.XDG_RUNTIME_DIR;
  let base: string | undefined;
  if (xdg) {
    try {
      const st = lstatSync(xdg);
      if (st.isDirectory() && st.uid === uid) base = join(xdg, 'cordon');
    } catch {
      // not there: the fallback
    }
  }
  return privateDir(base ?? join(tmpdir(), `cordon-${uid}`), () => homeFallback('leases'), leaseDirUnsafe);
}

/** Windows: %LOCALAPPDATA%\cordon\leases (the records only; the endpoints are named pipes), private (private-dir.ts's windowsPrivateDir()). */
export function windowsLeaseDir(): string {
  return windowsPrivateDir('leases', leaseDirUnsafe);
}
