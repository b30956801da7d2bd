// Types of common.mjs (plain JavaScript, shared with the Windows suite).
import type { Readable } from 'node:stream';

export const ALLOWANCE_VAR: string;
export const ALLOWANCE_FLOOR_MS: number;
export const ALLOWANCE_CAP_MS: number;
export function clampAllowance(measured: number): number;
export const LOAD_ALLOWANCE_MS: number;
export function promised(ms: number): number;
export function sleep(ms: number): Promise<void>;
export function parsePidLines(text: string, onPid?: (pid: number, name: string) => void): Record<string, number>;
export function onLines(stream: Readable, onLine: (line: string) => void): () => string;
export function withWatchdog<T>(promise: Promise<T>, ms: number, failure: () => Error): Promise<T>;
export function pollUntil(check: () => boolean | Promise<boolean>, ms: number, interval: number): Promise<boolean>;

/** A live process a failed wait names: its pid and one line that says what it is. */
export interface Survivor {
  pid: number;
  line: string;
}

/** How a suite sees a process from outside; installed once with useProbe(). */
export interface Probe {
  /** Named in errors (the vitest suite: its observer's name). */
  readonly name: string;
  /** The start stamp of the live process on `pid` (compared for equality only); undefined when none is (a zombie is not live). */
  start(pid: number): string | undefined;
  /** One line that says what the process on `pid` is, for a failure. */
  describe(pid: number): string;
  /** The live processes a name stands for (the vitest suite: a tag); absent where a suite has no names. */
  named?(name: string): Survivor[];
  /** How often waitFor() checks, in ms. */
  readonly pollMs: number;
}

/** What a failed wait names as still alive: a pid, an object that lists its survivors, a name (the vitest suite: a tag), or a list of those. */
export type Watch = number | string | { survivors(): Survivor[] } | readonly Watch[];

export function useProbe(probe: Probe): void;
export function rememberIdentity(pid: number): number;
export function renewIdentity(pid: number): number;
export function forgetIdentities(): void;
/** The process on `pid`, of start stamp `start` (from the probe or another observer), is the one the test knows there. */
export function sameIdentity(pid: number, start: string): boolean;
export function alive(pid: number): boolean;
export function parsePids(text: string, onPid?: (pid: number, name: string) => void): Record<string, number>;
export function survivors(watch: Watch): Survivor[];
export function within<T>(promise: Promise<T>, timeout: number, what: string, watch?: Watch): Promise<T>;
export function waitFor(check: () => boolean | Promise<boolean>, options: { timeout: number; what: string; watch?: Watch }): Promise<void>;
export function waitGone(watch: Watch, timeout: number, what?: string): Promise<void>;
