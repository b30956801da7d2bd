// A contained terminal (`pty`): the command's stdio is the slave side of a
// pseudo-terminal its anchor opens and relays (native/posix/pty_relay.h):
// stdin is the terminal's input, stdout its output (stderr goes there too),
// and resize() sets its window size. POSIX tiers, and Windows where it has
// ConPTY (native/win/pty.h); elsewhere on Windows (before 10 1809, Wine)
// spawn() refuses the option.
import { invalidArg, nulByte, terminalUnsupported } from './errors.js';
import { probe } from './native.js';
import { windowsTerminal } from './tiers.js';

/** What this Windows host offers a terminal: ConPTY, Wine's (refused), or none. */
function hostConsole(): 'conpty' | 'wine' | 'none' {
  const p = probe();
  if (windowsTerminal(p)) return 'conpty';
  return p.wine && p.pseudoConsole ? 'wine' : 'none';
}

/** `pty: true` or its size and terminal type. */
export interface TerminalOption {
  /** Columns, 1 to 65535. Default 80. */
  cols?: number;
  /** Rows, 1 to 65535. Default 24. */
  rows?: number;
  /** TERM for the command. Default: the `env` option's TERM, else 'xterm-256color'. */
  term?: string;
}

export interface Terminal {
  cols: number;
  rows: number;
  /** Undefined: the default (see TerminalOption.term). */
  term: string | undefined;
}

export const DEFAULT_COLS = 80;
export const DEFAULT_ROWS = 24;
export const DEFAULT_TERM = 'xterm-256color';

/** A window dimension: a whole number from 1 to 65535 (a struct winsize field). */
export function windowDimension(name: string, value: unknown, fallback?: number): number {
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535) {
    throw invalidArg(name, value, 'a whole number from 1 to 65535', typeof value === 'number' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  return value;
}

/** The `pty` option, checked: undefined when no terminal is asked for. */
export function terminalOption(
  value: unknown,
  platform: NodeJS.Platform = process.platform,
  windowsConsole: () => 'conpty' | 'wine' | 'none' = hostConsole,
): Terminal | undefined {
  if (value === undefined || value === false) return undefined;
  if (value !== true && (typeof value !== 'object' || value === null || Array.isArray(value))) {
    throw invalidArg('pty', value, 'true, false or { cols, rows, term }', 'ERR_INVALID_ARG_TYPE');
  }
  const o = (value === true ? {} : value) as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!['cols', 'rows', 'term'].includes(key)) throw invalidArg('pty', key, 'only cols, rows and term');
  }
  const cols = windowDimension('pty.cols', o.cols, DEFAULT_COLS);
  const rows = windowDimension('pty.rows', o.rows, DEFAULT_ROWS);
  if (o.term !== undefined && (typeof o.term !== 'string' || o.term.length === 0)) {
    throw invalidArg('pty.term', o.term, 'a terminal type such as xterm-256color', typeof o.term === 'string' ? 'ERR_INVALID_ARG_VALUE' : 'ERR_INVALID_ARG_TYPE');
  }
  if (typeof o.term === 'string' && o.term.includes('\0')) throw nulByte('pty.term');
  if (platform === 'win32') {
    const has = platform === process.platform ? windowsConsole() : 'none';
    if (has !== 'conpty') throw terminalUnsupported(has);
  }
  return { cols, rows, term: o.term as string | undefined };
}

/**
 * The command's environment with a terminal: TERM is the `term` asked for,
 * else the caller's own `env.TERM`, else xterm-256color (the host's inherited
 * TERM names the host's terminal, not this one).
 */
export function terminalEnv(env: NodeJS.ProcessEnv, given: NodeJS.ProcessEnv | undefined, terminal: Terminal): NodeJS.ProcessEnv {
  return { ...env, TERM: terminal.term ?? given?.TERM ?? DEFAULT_TERM };
}
