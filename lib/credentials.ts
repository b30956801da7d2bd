// uid/gid: the command runs as another user and group, on POSIX.
// The anchor stays as the host started it (it must signal and reap every
// member) and drops privileges in the command's child only, between its
// containment step and exec (native/posix/anchor.cc); supplementary groups
// are dropped with them. A drop the host has no privilege for is a launch
// failure (the anchor's NOCONTAIN ... setuid): nothing of the command ran.
import { invalidArg, posixOnly } from './errors.js';

export function credentialOption(name: 'uid' | 'gid', value: unknown, platform: NodeJS.Platform = process.platform): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number') throw invalidArg(name, value, 'a whole number from 0 to 2147483647', 'ERR_INVALID_ARG_TYPE');
  if (!Number.isInteger(value) || value < 0 || value > 2147483647) throw invalidArg(name, value, 'a whole number from 0 to 2147483647');
  if (platform === 'win32') {
    throw posixOnly(name);
  }
  return value;
}
