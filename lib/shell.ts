// Shell mode: `spawn('npm run dev && echo ok', [], { shell: true })`
// runs one command string through a shell, contained like any command (the
// shell is the tree's root). Pure: the launch is `<shell> -c <string>`.
//
// Arguments given with shell mode are never pasted into the string (execa and
// child_process join them with spaces, unquoted: an injection trap). On POSIX
// they reach the shell as its positional parameters and the string is run as
// `<string> "$@"`, so each arrives as one literal word whatever it holds.
//
// Windows: cmd.exe only (the system's own, %SystemRoot%\System32\cmd.exe,
// whatever PATH holds), run by the anchor as `cmd.exe /d /v:OFF /s /c "<string>"`
// (--cmd-shell: the string is handed over verbatim, cmd.exe strips the outer
// quotes). cmd.exe has no positional parameters, so arguments are refused;
// so are CR and LF (cmd.exe ends the line there). PowerShell and other shells
// are not supported yet: a typed error before anything runs.
import { basename, win32 } from 'node:path';
import { invalidArg, nulByte, shellUnsupported } from './errors.js';

/** The POSIX shell `shell: true` means. */
export const DEFAULT_SHELL = '/bin/sh';

/** A shell to run the command string with: a POSIX shell (`-c`), or Windows' cmd.exe. */
export interface ShellSpec {
  kind: 'posix' | 'cmd';
  /** The shell as given (a path or a name on PATH); on Windows 'cmd.exe'. */
  path: string;
}

/** The `shell` option: undefined (no shell), or the shell to run. */
export function shellOption(value: unknown, platform: NodeJS.Platform = process.platform): ShellSpec | undefined {
  if (value === undefined || value === false) return undefined;
  if (value !== true && (typeof value !== 'string' || value.length === 0)) {
    throw invalidArg('shell', value, 'true, false or a shell (a path or a name on PATH)', typeof value === 'string' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  if (typeof value === 'string' && value.includes('\0')) throw nulByte('The option "shell"');
  if (platform === 'win32') {
    if (value !== true && !/^cmd(\.exe)?$/i.test(win32.basename(value))) throw shellUnsupported(JSON.stringify(value));
    return { kind: 'cmd', path: 'cmd.exe' };
  }
  return { kind: 'posix', path: value === true ? DEFAULT_SHELL : value };
}

/** What runs in shell mode (POSIX: the shell, `-c`, the string and the arguments as its positional parameters). */
export function shellLaunch(shell: ShellSpec, command: string, args: readonly string[]): { command: string; args: string[] } {
  if (shell.kind === 'cmd') {
    if (args.length > 0) {
      throw invalidArg('args', args, "empty with shell on Windows (cmd.exe has no \"$@\"): write them into the command line, quoted for cmd.exe");
    }
    if (/[\r\n]/.test(command)) throw invalidArg('command', command, 'one line (cmd.exe ends a command line at CR or LF)');
    return { command: shell.path, args: [command] };
  }
  if (args.length === 0) return { command: shell.path, args: ['-c', command] };
  // "$0" is the shell's name; "$@" the arguments, each one word, never re-parsed.
  return { command: shell.path, args: ['-c', `${command} "$@"`, basename(shell.path), ...args] };
}
