// uid/gid (issue #16): the command runs as another user and group, on POSIX.
// The anchor stays as the host started it (it must signal and reap every
// member) and drops privileges in the command's child only, between its
// containment step and exec (native/posix/anchor.cc); supplementary groups
// are dropped with them. A drop the host has no privilege for is a launch
// failure (the anchor's NOCONTAIN ... setuid): nothing of the command ran.
import { CordonError, errnoName, invalidArg } from './errors.js';

export function credentialOption(name: 'uid' | 'gid', value: unknown, platform: NodeJS.Platform = process.platform): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number') throw invalidArg(name, value, 'a whole number from 0 to 2147483647', 'ERR_INVALID_ARG_TYPE');
  if (!Number.isInteger(value) || value < 0 || value > 2147483647) throw invalidArg(name, value, 'a whole number from 0 to 2147483647');
  if (platform === 'win32') {
    throw new CordonError(`The option "${name}" is POSIX only; Windows has no user and group ids. Nothing ran.`, {
      code: 'ERR_CORDON_UNSUPPORTED',
      stage: 'input',
    });
  }
  return value;
}

/** The anchor could not switch the command to uid/gid (NOCONTAIN <errno> setuid); nothing ran. */
export function privilegeDropFailed(errno: number, uid: number | undefined, gid: number | undefined): CordonError {
  const code = errnoName(errno);
  const as = [uid !== undefined ? `uid ${uid}` : '', gid !== undefined ? `gid ${gid}` : ''].filter(Boolean).join(', ');
  return new CordonError(
    `The command could not be started as ${as} (${code}); nothing ran. Changing user or group needs a privileged host ` +
      '(root, or CAP_SETUID/CAP_SETGID); leave uid and gid out to run as the host.',
    { code, errno: -Math.abs(errno), syscall: 'setuid', stage: 'launch' },
  );
}
