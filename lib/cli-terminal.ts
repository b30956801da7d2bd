// `cordon run --pty`: the user's own terminal attached to the tree's terminal,
// as ssh attaches one: raw mode (every key, Ctrl-C included, goes to the
// contained program, whose terminal's line discipline acts on it), the
// window's size at the start and on every resize, and the terminal type.
import type { ContainedProcess } from './process.js';
import type { TerminalOption } from './terminal.js';

/** The tree's terminal like the user's: its size (where stdout is a terminal) and TERM. */
export function terminalLikeUsers(): TerminalOption {
  const out = process.stdout;
  const size = out.isTTY && out.columns > 0 && out.rows > 0 ? { cols: out.columns, rows: out.rows } : {};
  return { ...size, ...(process.env.TERM ? { term: process.env.TERM } : {}) };
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
    input.off('data', forward);
    input.pause();
    output.off('resize', resize);
  };
}
