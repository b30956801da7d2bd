// Adoption latency (issue #17): a host process spawns a leased `sleep 60` and
// is SIGKILLed; this process then adopts the tree (connect, ADOPT, the replay
// up to READY: registry.adopt() resolving and proc.started) and kills it.
// Timed: from the call to registry.adopt() to proc.started.
import { spawn as spawnChild } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from '../../dist/index.js';
import { quantile } from './overhead.mjs';

const HOST = `
import { spawn } from ${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)};
const proc = spawn('sleep', ['60'], { lease: 60000, log: process.argv[1] });
await proc.started;
while (proc.leaseId === undefined) await new Promise((r) => setTimeout(r, 5));
process.stdout.write(proc.leaseId + ' ' + proc.adoptionToken + '\\n');
setInterval(() => {}, 1 << 30);
`;

function leasedHost(env, log) {
  return new Promise((resolve, reject) => {
    const child = spawnChild(process.execPath, ['--input-type=module', '-e', HOST, log], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    const timer = setTimeout(() => reject(new Error('the leased host printed nothing within 15 s')), 15_000);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      text += chunk;
      const m = /^(\S+) (\S+)\n/.exec(text);
      if (!m) return;
      clearTimeout(timer);
      child.once('exit', () => resolve({ id: m[1], token: m[2] }));
      child.kill('SIGKILL');
    });
  });
}

export async function measureAdoption({ env, runs = 10, onProgress = () => {} }) {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-bench-lease-'));
  const registry = new Registry();
  const times = [];
  try {
    for (let i = 0; i < runs; i++) {
      const { id, token } = await leasedHost(env, join(dir, `${i}.log`));
      const t = performance.now();
      const proc = await registry.adopt(id, { token });
      await proc.started;
      times.push(performance.now() - t);
      await proc.kill();
      await proc.result.catch(() => {});
      if ((i + 1) % 5 === 0) onProgress(`${i + 1}/${runs}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { runs, median: quantile(times, 0.5), p95: quantile(times, 0.95) };
}
