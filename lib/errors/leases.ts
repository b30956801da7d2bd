// Leases and adoption: the lease directory (lib/anchor/lease-dir.ts), adopt()
// (lib/adopt.ts), and a leased anchor's adoption endpoint
// (lib/anchor/*-endpoint.ts) before adopt() names the tree.
import { CordonError, type CordonErrorCode } from './error.js';

/** A refusal before anything is adopted (stage 'input'). */
function adoptionError(message: string, code: CordonErrorCode): CordonError {
  return new CordonError(message, { code, stage: 'input' });
}

/** The lease directory is not private to this user (or is in the way); `why` says how. */
export function leaseDirUnsafe(dir: string, why: string): CordonError {
  const what =
    process.platform === 'win32'
      ? 'cordon keeps lease records only in a directory there (made with a DACL for this user alone). Remove what is in the way, or set LOCALAPPDATA to a directory of yours.'
      : "cordon keeps adoption endpoints only in a directory that is this user's alone (0700, not a symlink). Remove it or set XDG_RUNTIME_DIR to a private directory.";
  return new CordonError(`The lease directory ${dir} ${why}; ${what}`, { code: 'ERR_CORDON_LEASE_DIR', path: dir, stage: 'input' });
}

/**
 * Windows: the leased anchor, once started, found itself in a Job Object
 * that kills its members when it closes (one of the host's jobs that let it
 * not leave silently: a service wrapper's, a CI agent's), so the lease could
 * not outlive that job's owner; the anchor ran nothing (NOCONTAIN lease-job,
 * `flags` the job's LimitFlags as it read them).
 */
export function leaseJobBound(flags: number): CordonError {
  const read = Number.isInteger(flags) ? `LimitFlags 0x${flags.toString(16)}: ` : '';
  return new CordonError(
    `A lease cannot outlive this process here: the leased tree's anchor runs in a Job Object that kills its members when it closes ` +
      `(${read}JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE), a job this process runs in that lets no child leave it silently, as service wrappers and CI agents make them; ` +
      `the tree would end when that job's owner closes it. Run the host outside that job, have its owner allow silent breakaway ` +
      `(JOB_OBJECT_LIMIT_SILENT_BREAKAWAY_OK), or spawn without \`lease\`. Nothing ran.`,
    { code: 'ERR_CORDON_LEASE_JOB', stage: 'launch' },
  );
}

/** adopt(): the leased anchor refused tree `id` (`why` as its DENIED reason). */
export function adoptDenied(id: string, why: string, cause?: unknown): CordonError {
  const reason =
    why === 'token'
      ? 'the token is wrong'
      : why === 'attached'
        ? 'another host holds it (it was adopted first, or its host is alive)'
        : why === 'expired'
          ? 'its lease ran out and it is being terminated'
          : why === 'notoken'
            ? 'its host never sent a token'
            : why === 'hello'
              ? 'the anchor heard no request in time (try again)'
              : why === 'stream'
                ? 'its anchor does not relay that output stream'
                : why === 'busy'
                  ? 'an earlier reader of its output is still attached'
                  : why;
  const err = adoptionError(`Tree ${id} cannot be adopted: ${reason}. Adopt with the token the creating host had (proc.adoptionToken), or the owner's id and the registry's secret.`, 'ERR_CORDON_ADOPT_DENIED');
  if (cause !== undefined) Object.defineProperty(err, 'cause', { value: cause });
  return err;
}

/** adopt(): no adoptable tree by that id. */
export function unknownLease(id: string, cause?: unknown): CordonError {
  const err = adoptionError(`No adoptable tree ${id} (it ended, its lease ran out, or it belongs to another user); list them with registry.adoptable().`, 'ERR_CORDON_UNKNOWN_TREE');
  if (cause !== undefined) Object.defineProperty(err, 'cause', { value: cause });
  return err;
}

/** adopt(): the leased anchor is alive but did not answer within `ms` (stage 'run'). */
export function anchorNotAnswering(id: string, anchorPid: number, ms: number, cause: unknown): CordonError {
  return new CordonError(
    `The anchor of leased tree ${id} (pid ${anchorPid}) is alive but did not answer within ${ms} ms (it is stopped, or the machine is overloaded); nothing was adopted: try again.`,
    { code: 'ERR_CORDON_TIMEOUT', cause },
  );
}

/** adopt(): neither a well-formed token nor a registry secret. */
export function adoptToken(): CordonError {
  return adoptionError('adopt(id, { token }) takes the tree\'s adoption token (32 hex characters), or a Registry with a `secret`.', 'ERR_INVALID_ARG_VALUE');
}

/** The endpoint refused the request: DENIED <why> (token, attached, notoken, expired, hello, stream, busy). */
export function adoptRefused(endpoint: string, why: string): CordonError & { why: string } {
  const err = new CordonError(`The leased anchor at ${endpoint} refused: ${why}.`, { code: 'ERR_CORDON_ADOPT_DENIED', path: endpoint });
  return Object.assign(err, { why });
}

/**
 * Windows: the pipe by the endpoint's name is served by another process than
 * the tree's anchor (its pid in the lease record); nothing was written to it.
 */
export function endpointImpostor(endpoint: string, anchorPid: number, serverPid: number): CordonError & { why: string; serverPid: number } {
  const err = new CordonError(
    `The lease endpoint ${endpoint} is served by process ${serverPid}, not by the tree's anchor (pid ${anchorPid}); nothing was sent to it, the token included. Another program holds that pipe name: end process ${serverPid} if it is not one of yours, then list the adoptable trees again.`,
    { code: 'ERR_CORDON_ADOPT_DENIED', path: endpoint },
  );
  return Object.assign(err, { why: 'impostor', serverPid });
}

/** The endpoint answered something else than the request's answer, or closed without one. */
export function endpointAnswer(endpoint: string, request: string, got: string): CordonError {
  return new CordonError(`The lease endpoint ${endpoint} answered ${request.toUpperCase()} with ${JSON.stringify(got)}.`, { code: 'ERR_CORDON_ANCHOR_LOST', path: endpoint });
}

/** No endpoint by that name: its anchor is gone. */
export function endpointGone(endpoint: string, cause: unknown): CordonError {
  return new CordonError(`No leased tree listens on ${endpoint} (its anchor is gone): list the adoptable trees again.`, { code: 'ERR_CORDON_UNKNOWN_TREE', cause, path: endpoint });
}

/** The endpoint could not be connected to. */
export function endpointUnreachable(endpoint: string, cause: NodeJS.ErrnoException): CordonError {
  return new CordonError(`The lease endpoint ${endpoint} could not be reached (${cause.code ?? cause.message}).`, { code: cause.code ?? 'ERR_CORDON_UNKNOWN_TREE', cause, path: endpoint });
}

/** The endpoint did not answer within the bound. */
export function endpointTimeout(endpoint: string, ms: number): CordonError {
  return new CordonError(`No answer from the lease endpoint ${endpoint} within ${ms} ms; try again.`, { code: 'ERR_CORDON_TIMEOUT', path: endpoint });
}
