// Shell mode (issue #16): `spawn('npm run dev && echo ok', [], { shell: true })`
// runs one command string through a shell, contained like any command (the
// shell is the tree's root). Pure: the launch is `<shell> -c <string>`.
//
// Arguments given with shell mode are never pasted into the string (execa and
// child_process join them with spaces, unquoted: an injection trap). On POSIX
// they reach the shell as its positional parameters and the string is run as
// `<string> "$@"`, so each arrives as one literal word whatever it holds.
// Windows (cmd.exe's quoting and batch-file rules) is not supported yet: a
// typed error, before anything runs.
import { basename } from 'node:path';
import { CordonError } from './errors.js';
import { invalidArg, nulByte } from './errors.js';

/** The POSIX shell `shell: true` means. */
export const DEFAULT_SHELL = '/bin/sh';

/** The `shell` option: undefined (no shell), or the shell to run (a path or a name looked up in PATH). */
export function shellOption(value: unknown, platform: NodeJS.Platform = process.platform): string | undefined {
  if (value === undefined || value === false) return undefined;
  if (value !== true && (typeof value !== 'string' || value.length === 0)) {
    throw invalidArg('shell', value, 'true, false or a shell (a path or a name on PATH)', typeof value === 'string' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  if (platform === 'win32') {
    throw new CordonError(
      'The option "shell" is not supported on Windows yet (cmd.exe re-parses its command line, and its quoting is not done safely yet); nothing ran. ' +
        'Run the program itself with its arguments, or pass cmd.exe and its arguments as the command.',
      { code: 'ERR_CORDON_UNSUPPORTED', stage: 'input' },
    );
  }
  if (value === true) return DEFAULT_SHELL;
  if (value.includes('\0')) throw nulByte('The option "shell"');
  return value;
}

/** What runs in shell mode: the shell, then `-c`, the string and (when given) the arguments as its positional parameters. */
export function shellLaunch(shell: string, command: string, args: readonly string[]): { command: string; args: string[] } {
  if (args.length === 0) return { command: shell, args: ['-c', command] };
  // "$0" is the shell's name; "$@" the arguments, each one word, never re-parsed.
  return { command: shell, args: ['-c', `${command} "$@"`, basename(shell), ...args] };
}
