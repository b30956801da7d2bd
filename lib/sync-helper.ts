// The process cordon/child_process's sync functions (spawnSync, execSync,
// execFileSync: lib/child_process.ts) wait in. A synchronous call blocks the
// host's event loop, which serves every anchor's channel; so the host runs
// Node's own spawnSync on this helper, and the helper runs the command
// contained with the stdio it was given (inherited: the host's pipes, its
// `input`, or what the caller passed), on an event loop of its own. It says
// in the report file the host named (CORDON_SYNC_REPORT, in a directory of
// the host's own, mode 0700; one JSON object a line) the root's pid, then how
// the tree ended or why it never ran: a file, not a pipe, since spawnSync's
// maxBuffer counts every pipe and the report is not the command's output. Its host gone (SIGKILL, a crash: this process is
// reparented) it exits, and its tree ends with it (CONTRACT C8); a signal that
// stops it (spawnSync's maxBuffer) stops the tree the same way.
import { appendFileSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { spawn } from './process.js';
import type { CordonError } from './errors.js';

const reportFile = process.env.CORDON_SYNC_REPORT ?? '';
delete process.env.CORDON_SYNC_REPORT;
const report = (message: object): void => {
  try {
    appendFileSync(reportFile, `${JSON.stringify(message)}\n`, { mode: 0o600 });
  } catch {
    // the host is gone (and its directory with it): nobody reads it
  }
};

const request = JSON.parse(process.env.CORDON_SYNC_REQUEST ?? '{}') as { file: string; args: string[]; options: Record<string, unknown> };
delete process.env.CORDON_SYNC_REQUEST;

const host = process.ppid;
// The host gone (it would have removed the report's directory after the
// call): nobody reads the report, so the directory goes with this helper.
const watch = setInterval(() => {
  if (process.ppid === host) return;
  if (reportFile && basename(dirname(reportFile)).startsWith('cordon-sync-')) rmSync(dirname(reportFile), { recursive: true, force: true });
  process.exit(1);
}, 100);

const failed = (error: unknown): void => {
  const e = error as CordonError;
  report({ error: { code: String(e.code ?? 'EINVAL'), errno: e.errno, stage: e.stage, message: e.message } });
};

// The command's stdout and stderr reach this helper's own (what spawnSync
// reads, or the caller's descriptors) through cordon's pipes, relayed here,
// never inherited: a descendant that keeps a pipe open (a setsid escapee the
// tier cannot see) then holds cordon's pipe, which the wait delay bounds, and
// not spawnSync's, which would keep the synchronous call waiting until it
// exits. This helper is the only writer of its own: when it exits, spawnSync
// has all the output and returns.
function relay(from: NodeJS.ReadableStream | null, fd: number): Promise<void> {
  if (!from) return Promise.resolve();
  from.on('data', (chunk: Buffer) => {
    for (let off = 0; off < chunk.length; ) {
      try {
        off += writeSync(fd, chunk, off);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EAGAIN') continue; // a non-blocking descriptor, full for now
        from.removeAllListeners('data');
        from.resume();
        return; // the reader is gone (EPIPE): the rest flows away
      }
    }
  });
  return new Promise((resolve) => {
    from.once('end', resolve);
    from.once('close', resolve);
  });
}

try {
  const proc = spawn(request.file, request.args, { ...request.options, stdio: ['inherit', 'pipe', 'pipe'] });
  const relayed = Promise.all([relay(proc.stdout, 1), relay(proc.stderr, 2)]);
  proc.on('spawn', (pid) => report({ pid }));
  proc.result
    .then(
      (result) => report({ exit: { code: result.exitCode, signal: result.signal, reason: result.reason } }),
      failed,
    )
    // The streams end or are destroyed by the time the result settles (the wait delay bounds them); bounded here all the same.
    .then(() => Promise.race([relayed, new Promise((resolve) => setTimeout(resolve, 5000).unref())]))
    .finally(() => {
      clearInterval(watch);
      process.exit(0);
    });
} catch (error) {
  failed(error);
  clearInterval(watch);
}
