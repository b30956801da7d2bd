// Every default and internal bound of the facade, in one place. docs/api.md's
// option tables state the same numbers (and the CLI's usage text repeats them).

/** Teardown grace: SIGTERM to every member, SIGKILL to what remains after it (CONTRACT C3). */
export const DEFAULT_GRACE_MS = 3000;
/** The grace used on abort, timeout and run()'s maxBuffer overflow. */
export const DEFAULT_INTERRUPT_GRACE_MS = 500;
/** After the root exits, how long descendants may hold the captured output (CONTRACT C4). */
export const DEFAULT_WAIT_DELAY_MS = 2000;
/** spawn()'s timeout: none. */
export const DEFAULT_TIMEOUT_MS = 0;
/** What happens to descendants still alive when the root exits (CONTRACT C5). */
export const DEFAULT_LEFTOVERS = 'kill';
/** Refuse to run uncontained. */
export const DEFAULT_CONTAINMENT = 'strict';
/** run(): bytes kept per stream; past it the tree is terminated and run() rejects. */
export const DEFAULT_MAX_BUFFER = 10 * 1024 * 1024;

/** How long a warm anchor (Linux, every tier; Windows) waits for a spawn to take it before it is retired (`CORDON_WARM` overrides; 0: none). */
export const WARM_IDLE_MS = 30_000;

/** Unread bytes a log-backed stdout/stderr view buffers before it drops output (the log keeps all). */
export const VIEW_BUFFER_LIMIT = 16 * 1024 * 1024;
