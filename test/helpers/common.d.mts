// Types of common.mjs (plain JavaScript, shared with the Windows suite).
import type { Readable } from 'node:stream';

export function sleep(ms: number): Promise<void>;
export function parsePidLines(text: string, onPid?: (pid: number, name: string) => void): Record<string, number>;
export function onLines(stream: Readable, onLine: (line: string) => void): () => string;
export function withWatchdog<T>(promise: Promise<T>, ms: number, failure: () => Error): Promise<T>;
export function pollUntil(check: () => boolean | Promise<boolean>, ms: number, interval: number): Promise<boolean>;
