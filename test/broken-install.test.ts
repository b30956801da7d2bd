// A broken install (the anchor missing or not executable) is a typed
// error that says how to rebuild; cordon never falls back to running the
// command uncontained. Checked on a copy of the package laid out like an
// install, with the anchor removed or made non-executable.
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { repoRoot } from './helpers/fixtures.js';
import { ensureDist } from './helpers/host.js';
import { useTag } from './helpers/procs.js';

function installCopy(breakIt: (anchor: string) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-broken-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(join(repoRoot, 'dist'), join(dir, 'dist'), { recursive: true });
  cpSync(join(repoRoot, 'package.json'), join(dir, 'package.json'));
  mkdirSync(join(dir, 'build', 'Release'), { recursive: true });
  cpSync(join(repoRoot, 'build', 'Release', 'cordon.node'), join(dir, 'build', 'Release', 'cordon.node'));
  const anchor = join(dir, 'build', 'Release', 'cordon-anchor');
  cpSync(join(repoRoot, 'build', 'Release', 'cordon-anchor'), anchor);
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
  breakIt(anchor);
  return dir;
}

function tryRun(dir: string, env: NodeJS.ProcessEnv): { code?: string; message?: string; ran?: boolean } {
  const script = `
    import { spawn } from ${JSON.stringify(join(dir, 'dist', 'index.js'))};
    try {
      const p = spawn('sh', ['-c', 'echo RAN; sleep 300']);
      await p.result;
      console.log(JSON.stringify({ ran: true }));
    } catch (e) {
      console.log(JSON.stringify({ code: e.code, message: e.message }));
    }`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { env, encoding: 'utf8', timeout: 20_000 });
  return JSON.parse(out.trim().split('\n').pop()!);
}

describe('broken install', () => {
  beforeAll(async () => {
    await ensureDist();
  });

  for (const [what, breakIt] of [
    ['missing', (anchor: string) => unlinkSync(anchor)],
    ['not executable', (anchor: string) => chmodSync(anchor, 0o644)],
  ] as const) {
    // proves C1
    it(`a ${what} anchor is ERR_CORDON_ANCHOR_MISSING with how to rebuild; nothing runs`, () => {
      const t = useTag();
      const dir = installCopy(breakIt);
      const r = tryRun(dir, t.env);
      expect(r.ran, 'the command ran without its anchor').toBeUndefined();
      expect(r.code).toBe('ERR_CORDON_ANCHOR_MISSING');
      expect(r.message).toMatch(/rebuild/);
      expect(t.procs()).toEqual([]);
    });
  }
});
