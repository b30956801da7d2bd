// `cordon run --pty`: the user's own terminal attached to the tree's terminal,
// as ssh attaches one: raw mode (every key, Ctrl-C included, goes to the
// contained program, whose terminal's line discipline acts on it), the
// window's size at the start and on every resize, and the terminal type; and
// the tree's output shown byte for byte (output processing off, see below).
import { execFileSync } from 'node:child_process';
import type { ContainedProcess } from './process.js';
import type { TerminalOption } from './terminal.js';

/** The tree's terminal like the user's: its size (where stdout is a terminal) and TERM. */
export function terminalLikeUsers(): TerminalOption {
  const out = process.stdout;
  const size = out.isTTY && out.columns > 0 && out.rows > 0 ? { cols: out.columns, rows: out.rows } : {};
  return { ...size, ...(process.env.TERM ? { term: process.env.TERM } : {}) };
}

/**
 * Whether this terminal's output processing (OPOST) is off while a tree's
 * terminal is attached: then a line cordon itself writes to the terminal
 * needs its own carriage return (notice()).
 */
let outputRaw = false;

/** `stty <args>` on this process's stdout (its terminal); what it printed, or undefined when it failed. */
function sttyOnStdout(args: string[]): string | undefined {
  try {
    return execFileSync('stty', args, { stdio: [1, 'pipe', 'ignore'], encoding: 'utf8', timeout: 5000 });
  } catch {
    return undefined;
  }
}

/**
 * The tree's terminal already turned each newline into CR LF (its own
 * ONLCR): what it shows goes to this terminal as it is, as ssh and script
 * relay it. This terminal's output processing would add a CR of its own
 * (CR CR LF, captured as such by a terminal log or script(1)) and, worse,
 * turn the bare LF a full-screen program uses to move down into CR LF. So
 * OPOST goes off while attached (Node's setRawMode leaves it on) and comes
 * back on detach; Node itself restores the terminal's settings at exit too.
 * Returns the restore (nothing to do where stdout is no terminal, OPOST
 * was already off, or stty could not change it).
 */
function outputAsIs(output: NodeJS.WriteStream): () => void {
  if (!output.isTTY) return () => {};
  const settings = sttyOnStdout(['-a']);
  if (settings === undefined || !/(^|\s)opost(\s|$)/m.test(settings)) return () => {};
  if (sttyOnStdout(['-opost']) === undefined) return () => {};
  outputRaw = true;
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    outputRaw = false;
    sttyOnStdout(['opost']);
  };
  process.once('exit', restore);
  return restore;
}

/** A line of cordon's own on stderr, with CR LF line ends while the terminal's output processing is off. */
export function notice(text: string): void {
  process.stderr.write(outputRaw && process.stderr.isTTY ? text.replace(/\r?\n/g, '\r\n') : text);
}

/**
 * Attaches this process's stdin and stdout to the tree's terminal; returns the
 * detach. `sizeNow`: the tree's terminal takes this one's size at once (an
 * adopted tree's has its first host's).
 */
export function attachTerminal(proc: ContainedProcess, sizeNow = false): () => void {
  const input = process.stdin;
  const output = process.stdout;
  const raw = input.isTTY === true;
  const restore = () => {
    if (raw && input.isRaw) input.setRawMode(false);
  };
  if (raw) {
    input.setRawMode(true);
    process.once('exit', restore);
  }
  const restoreOutput = outputAsIs(output);
  const forward = (chunk: Buffer) => proc.stdin?.write(chunk);
  input.on('data', forward);
  output.on('error', () => {}); // a reader that went away must not end the run
  proc.stdout?.pipe(output, { end: false });
  const resize = () => {
    if (output.columns > 0 && output.rows > 0) proc.resize(output.columns, output.rows);
  };
  if (output.isTTY) output.on('resize', resize);
  if (output.isTTY && sizeNow) resize();
  return () => {
    restore();
    restoreOutput();
    input.off('data', forward);
    input.pause();
    output.off('resize', resize);
  };
}
