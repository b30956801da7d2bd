// Signal numbers and names, from one table: os.constants.signals. Where two
// names share a number (Linux: SIGABRT/SIGIOT 6, SIGIO/SIGPOLL 29) the first
// in Node's table is the name, as Node itself reports it (a child killed by
// abort() has `signal: 'SIGABRT'` in child_process, never SIGIOT).
import { constants as osConstants } from 'node:os';

const names = new Map<number, NodeJS.Signals>();
for (const [name, value] of Object.entries(osConstants.signals)) {
  if (!names.has(value)) names.set(value, name as NodeJS.Signals);
}

/** The name of signal number `signo` on this platform, or null if it has none. */
export function signalName(signo: number): NodeJS.Signals | null {
  return names.get(signo) ?? null;
}

/** The number of a named signal on this platform, or undefined if it has none. */
export function signalNumber(name: NodeJS.Signals): number | undefined {
  return osConstants.signals[name];
}
