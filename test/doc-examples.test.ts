// The code blocks of README.md and docs/*.md are what a new user copies first,
// so each one runs here as they would run it, or says beside it why it cannot
// (helpers/readme.ts: `<!-- not runnable: … -->`, `<!-- expect: … -->`).
//
// A scratch project stands in for the user's: `cordon` in its node_modules
// (this checkout, linked; in the package lane, CORDON_PACKAGE_TGZ, the packed
// tarball installed), a `server.js` that prints where it listens, and a git
// repository with a change in it. Every js block is type-checked under
// `tsc --strict` against the package's own types, then run by node, tagged,
// bounded and cleaned up by tag; its output must match its `expect` (or be
// what its `console.log(…); // …` comments say, line by line). A ts block
// is type-checked the same way and run as tsc emits it. A console block runs
// each `$` line with sh, and the output must be the block's but for numbers
// (pids, times) and the command lines of leftovers (caught before or after
// their exec).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capabilities } from '../lib/index.js';
import { cgroupWritable } from './helpers/cgroup.js';
import { repoRoot } from './helpers/fixtures.js';
import { describeProcs, useTag } from './helpers/procs.js';
import { docBlocks, transpile, typeCheck, where, type DocBlock } from './helpers/readme.js';
import { watchdog } from './helpers/time.js';

const blocks = docBlocks();
const runnable = blocks.filter((b) => b.notRunnable === undefined);
const notRunnable = blocks.filter((b) => b.notRunnable !== undefined);
const tgz = process.env.CORDON_PACKAGE_TGZ;
const RUN_TIMEOUT = watchdog(60_000);
let project = '';
// A console block shows a report of a tier that sees the whole tree: it runs in
// one (the process-group tier's reports add what it saw leave the group, and
// say its coverage is partial; under qemu-user, lane 7, it is the only tier).
const tiersHere = capabilities().tiers; // (under qemu-user only process-group, whatever the cgroups say)
const completeTier = tiersHere.includes('cgroup') && cgroupWritable() ? 'cgroup' : tiersHere.includes('subreaper') ? 'subreaper' : undefined;
const noCompleteTier = completeTier ? undefined : `this machine has no tier that sees the whole tree (tiers: ${tiersHere.join(', ')}); the samples show such a tier's report`;
if (noCompleteTier) console.warn(`doc examples: console blocks skipped: ${noCompleteTier}`);

const SERVER_JS = `import { createServer } from 'node:http';
const server = createServer((req, res) => res.end('hello'));
server.listen(0, '127.0.0.1', () => console.log(\`listening on http://127.0.0.1:\${server.address().port}\`));
`;

const LEAKY_TEST = `import { test } from 'node:test';
import { spawn } from 'node:child_process';

// proves nothing of the contract: a documented example runs as documented
test('starts a server and forgets it', () => {
  const script = 'require("http").createServer((q, s) => s.end("ok")).listen(0); setInterval(() => {}, 1e9)';
  spawn(process.execPath, ['-e', script], { detached: true, stdio: 'ignore' }).unref();
});
`;

beforeAll(() => {
  project = mkdtempSync(join(tmpdir(), 'cordon-docs-'));
  // docs/cli.md's `cordon leaks -- npm test`: a test that starts a server and forgets it.
  writeFileSync(join(project, 'package.json'), `${JSON.stringify({ name: 'my-app', version: '1.0.0', private: true, type: 'module', scripts: { test: 'node --test' } })}\n`);
  mkdirSync(join(project, 'test'));
  writeFileSync(join(project, 'test', 'leak.test.js'), LEAKY_TEST);
  if (tgz) {
    execFileSync('npm', ['install', '--no-audit', '--no-fund', tgz], { cwd: project, stdio: 'pipe', timeout: watchdog(300_000) });
  } else {
    mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true });
    symlinkSync(repoRoot, join(project, 'node_modules', 'cordon'));
    // What npm's bin link does, without needing dist/cli.js to be executable in a checkout.
    writeFileSync(join(project, 'node_modules', '.bin', 'cordon'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(repoRoot, 'dist', 'cli.js'))} "$@"\n`, { mode: 0o755 });
  }
  writeFileSync(join(project, 'server.js'), SERVER_JS);
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=docs', '-c', 'user.email=docs@example.invalid', ...args], { cwd: project, stdio: 'pipe' });
  writeFileSync(join(project, '.gitignore'), 'node_modules/\n');
  git('init', '-q', '.');
  git('add', '.');
  git('commit', '-q', '-m', 'scratch');
  writeFileSync(join(project, 'notes.txt'), 'a change\n');
}, watchdog(320_000));
afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

const label = (b: DocBlock) => `${where(b)} (${b.lang})`;

describe(`the code blocks of README.md and docs/*.md: ${runnable.length} run, ${notRunnable.length} marked not runnable${tgz ? ' (the packed tarball installed)' : ' (this checkout)'}`, () => {
  // proves nothing of the contract: the docs' blocks say why they are not run
  it('every block not run says why, and the README has examples that run', () => {
    console.log(`doc examples: ${runnable.length} run, ${notRunnable.length} not runnable:\n${notRunnable.map((b) => `  ${label(b)}: ${b.notRunnable}`).join('\n')}`);
    for (const b of notRunnable) expect(b.notRunnable, label(b)).toMatch(/\S{3}/);
    expect(runnable.filter((b) => b.file === 'README.md').length).toBeGreaterThanOrEqual(3);
    // A js/ts block that runs is checked by what it prints, never only by its exit status.
    expect(runnable.filter((b) => (b.lang === 'js' || b.lang === 'ts') && !b.expect && b.said.length === 0).map(label)).toEqual([]);
  });

  // proves nothing of the contract: the docs' blocks type-check
  it('every js and ts block that runs type-checks under tsc --strict against the installed package', () => {
    const sources = runnable
      .filter((b) => b.lang === 'js' || b.lang === 'ts')
      .map((b, i) => ({ name: `check-${i}.mts`, code: b.code, label: where(b) }));
    expect(typeCheck(sources, project)).toEqual([]);
  }, watchdog(120_000));

  for (const [i, b] of runnable.entries()) {
    if (b.lang === 'console') {
      // proves nothing of the contract: a documented example runs as documented
      it.skipIf(noCompleteTier)(`${label(b)} prints what the block shows (${completeTier ?? `skipped: ${noCompleteTier}`} tier)`, () => {
        const tag = useTag({ CORDON_TIER: completeTier });
        const commands = b.code.split('\n').filter((l) => l.startsWith('$ '));
        expect(commands.length, 'a console block shows at least one command').toBeGreaterThan(0);
        // One shell runs them all, as a user's would (`echo $?` after a command).
        const script = commands.map((c) => `${c.slice(2)}\n`).join('');
        const r = spawnSync('sh', ['-c', `{\n${script}} 2>&1`], { cwd: project, env: tag.env, encoding: 'utf8', timeout: RUN_TIMEOUT });
        expect(r.error, `${r.error?.message}; printed:\n${r.stdout}\nstill running:\n${describeProcs(tag.procs())}`).toBeUndefined();
        // The usage line is there only where the tier measures something (the cgroup tier).
        const kept = (l: string) => l !== '' && !l.startsWith('cordon: usage: ');
        const printed = r.stdout.split('\n').filter(kept);
        const shown = b.code.split('\n').filter((l) => kept(l) && !l.startsWith('$ '));
        expect(linesMatch(printed.map(shape), shown.map(shape)), `printed:\n${r.stdout}`).toBe(true);
      }, RUN_TIMEOUT + 10_000);
    } else if (b.lang === 'js' || b.lang === 'ts') {
      const lacking = b.needs && (capabilities().guarantees as unknown as Record<string, unknown>)[b.needs] !== true ? `this host does not give ${b.needs} (capabilities().guarantees.${b.needs})` : undefined;
      // proves nothing of the contract: a documented example runs as documented
      it.skipIf(!!lacking)(`${label(b)} runs and prints what it says${lacking ? ` [skipped: ${lacking}]` : ''}`, () => {
        const tag = useTag();
        const file = join(project, `run-${i}.mjs`);
        writeFileSync(file, b.lang === 'ts' ? transpile(b.code) : b.code);
        const r = spawnSync(process.execPath, [file], { cwd: project, env: tag.env, encoding: 'utf8', timeout: RUN_TIMEOUT });
        const said = `exit ${r.status ?? r.signal}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}\nstill running:\n${describeProcs(tag.procs())}`;
        expect(r.error, said).toBeUndefined();
        expect(r.status, said).toBe(0);
        if (b.expect) expect(r.stdout, said).toMatch(b.expect);
        else expect(r.stdout.trimEnd().split('\n'), `${said}\nwhat its comments say it prints:\n${b.said.join('\n')}`).toEqual(b.said);
      }, RUN_TIMEOUT + 10_000);
    } else {
      // proves nothing of the contract: a documented example runs as documented
      it(`${label(b)} runs`, () => {
        const tag = useTag();
        const r = spawnSync('sh', ['-ec', b.code], { cwd: project, env: tag.env, encoding: 'utf8', timeout: RUN_TIMEOUT });
        const said = `exit ${r.status ?? r.signal}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}\nstill running:\n${describeProcs(tag.procs())}`;
        expect(r.status, said).toBe(0);
        if (b.expect) expect(r.stdout, said).toMatch(b.expect);
      }, RUN_TIMEOUT + 10_000);
    }
  }

  // proves nothing of the contract: a documented example runs as documented
  it("README's first block shows the main job as the main job's section runs it", () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const first = blocks.find((b) => b.file === 'README.md')!;
    const mainJob = blocks.find((b) => b.file === 'README.md' && b.lang === 'console')!;
    const cordonLine = first.code.split('\n').find((l) => l.startsWith('npx cordon'));
    expect(cordonLine, 'the first block ends with the main job').toBeDefined();
    expect(mainJob.code.split('\n')[0]).toBe(`$ ${cordonLine}`);
    expect(readme.split('\n').length, 'README.md fits in 250 lines').toBeLessThanOrEqual(250);
  });

  // proves nothing of the contract: the CommonJS entry point
  it("require() from CommonJS gives the same API (Node's require of ES modules, 20.19+: package.json's engines)", () => {
    const file = join(project, 'require.cjs');
    writeFileSync(file, `const c = require('cordon');\nconsole.log(['spawn', 'run', 'capabilities', 'Registry'].map((k) => typeof c[k]).join(' '));\n`);
    const out = execFileSync(process.execPath, [file], { cwd: project, encoding: 'utf8', timeout: watchdog(30_000) });
    expect(out.trim()).toBe('function function function function');
    const engines = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
    expect(engines).toBe('>=20.19');
  });
});

/** `printed` is `shown`, where a line `...` of `shown` stands for any lines (none included). */
function linesMatch(printed: string[], shown: string[]): boolean {
  if (shown.length === 0) return printed.length === 0;
  if (shown[0] === '...') return printed.some((_, i) => linesMatch(printed.slice(i), shown.slice(1))) || linesMatch([], shown.slice(1));
  return printed.length > 0 && printed[0] === shown[0] && linesMatch(printed.slice(1), shown.slice(1));
}

/** A line's shape: pids, times, the tier's name and leftovers' command lines aside. */
function shape(line: string): string {
  return line
    .replace(/^(cordon: {3}pid )\d+: .*$/, '$1N: <command>')
    .replace(/, [a-z-]+ tier\)/, ', <tier> tier)')
    .replace(/\bpid \d+/g, 'pid N')
    // (Its unit too: a command the block shows taking 318ms takes 1.16s on a loaded machine.)
    .replace(/\b\d+(\.\d+)?(ms|s)\b/g, '<time>');
}
