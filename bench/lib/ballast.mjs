// Ballast: idle processes unrelated to anything measured (`sleep 100000`),
// standing in for the browser, IDE or build farm a real host runs beside a
// cordon host. They make /proc as long as such a host's.
//
// Each chunk is one `sh` that starts its sleeps in a loop, prints their pids,
// then execs into a `sleep` that never reaps: a ballast process that dies stays
// a zombie of that parent until the parent itself is gone, so its pid cannot be
// handed out again while the benchmark signals it. Ending the ballast is by pid
// only: SIGKILL each printed pid, then the chunk's parent (a direct child of
// the benchmark, reaped by it); init reaps the orphaned zombies. Every ballast
// process also carries the run's tag (prefix RUN_ID), so the run's final sweep
// would find any that escaped this bookkeeping.
import { spawn } from 'node:child_process';
import { TAG_VAR, newTag } from './procs.mjs';

const CHUNK = 1000;

export class Ballast {
  chunks = []; // { child, pids: number[] }

  get count() {
    return this.chunks.reduce((n, c) => n + c.pids.length, 0);
  }

  /** Starts ballast until `target` processes of it are alive. */
  async grow(target, onProgress = () => {}) {
    while (this.count < target) {
      const n = Math.min(CHUNK, target - this.count);
      await this.#chunk(n);
      onProgress(this.count);
    }
  }

  async #chunk(n) {
    const script =
      `i=0; while [ $i -lt ${n} ]; do sleep 100000 </dev/null >/dev/null 2>&1 & echo $!; i=$((i+1)); done; ` +
      'echo DONE; exec sleep 100000 </dev/null >/dev/null 2>&1';
    const child = spawn('sh', ['-c', script], {
      env: { ...process.env, [TAG_VAR]: newTag('ballast') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const chunk = { child, pids: [], exited: false };
    this.chunks.push(chunk);
    child.once('exit', () => (chunk.exited = true));
    let text = '';
    child.stdout.setEncoding('utf8');
    await new Promise((resolve, reject) => {
      child.once('error', reject);
      child.stdout.on('data', (c) => {
        text += c;
        if (/^DONE$/m.test(text)) resolve();
      });
      child.stdout.once('end', () => (/^DONE$/m.test(text) ? resolve() : reject(new Error('a ballast chunk ended before DONE'))));
    });
    for (const m of text.matchAll(/^(\d+)$/gm)) chunk.pids.push(Number(m[1]));
  }

  /** Ends every ballast process by pid (synchronous: usable from a signal handler or 'exit'). */
  clearSync() {
    for (const chunk of this.chunks) {
      if (!chunk.exited) {
        // While the parent lives, a killed sleep stays its zombie: its pid cannot be recycled.
        for (const pid of chunk.pids) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already a zombie or gone
          }
        }
      }
      chunk.child.kill('SIGKILL');
    }
    const ended = this.chunks;
    this.chunks = [];
    return ended;
  }

  /** Ends every ballast process and waits for the chunks' parents to be reaped. */
  async clear() {
    const ended = this.clearSync();
    await Promise.all(ended.map((c) => (c.exited ? undefined : new Promise((r) => c.child.once('exit', r)))));
  }
}
