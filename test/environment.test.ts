// The command's environment (issue #16, as execa): `env` is laid over the
// host's environment unless `extendEnv: false`; `preferLocal` puts the
// `node_modules/.bin` of cwd (or `localDir`) and its parents first on PATH.
// Observed from outside: the environment each member really has, read through
// the observer (/proc/<pid>/environ, or ps with environments), and which
// executable really ran.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn } from '../lib/index.js';
import { capture } from './helpers/fixtures.js';
import { fixtureProgram } from './helpers/compiled.js';
import { observer } from './helpers/observer.js';
import { TAG_VAR, useTag, waitGone, within } from './helpers/procs.js';
import { tempDir } from './helpers/registry.js';
import { caps, tier } from './helpers/tier.js';
import { pollUntil } from './helpers/common.mjs';
import { watchdog } from './helpers/time.js';

function readEnviron(pid: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of observer.environ(pid) ?? []) {
    const eq = entry.indexOf('=');
    if (eq > 0) out[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return out;
}

/**
 * The environment of a live process, as the kernel has it, once it can be
 * read whole. These fixtures print their pid and then exec sleep: a process
 * in the middle of an exec shows an empty environ for a moment (seen under
 * qemu), so the read is repeated, bounded, until it has the test's tag,
 * which every process these tests start carries.
 */
async function environOf(pid: number): Promise<Record<string, string>> {
  let env: Record<string, string> = {};
  const readable = await pollUntil(() => TAG_VAR in (env = readEnviron(pid)), watchdog(5000), 10);
  if (!readable) throw new Error(`the ${observer.name} observer never showed, in the environment of pid ${pid}, ${TAG_VAR}: ${JSON.stringify(env)}`);
  return env;
}

/**
 * sleep, as a program whose environment the observer may read: on macOS not
 * Apple's (a platform binary, whose environment ps is not shown) but the
 * suite's compiled fixture's (test/helpers/compiled.ts: needs cc there).
 */
function sleepCommand(): string {
  return process.platform === 'darwin' ? `'${fixtureProgram()}' sleep` : 'sleep';
}

/** A root with a child, both holding their environment (exec sleep), printing their pids. */
function tree(): string[] {
  const sleep = sleepCommand();
  return ['-c', `${sleep} 300 & echo "PID child $!"; echo "PID root $$"; exec ${sleep} 300`];
}

describe('env extends process.env by default', () => {
  // proves nothing of the contract: the env option
  it('env: { only the tag, FOO } keeps PATH and HOME, and the tag reaches every member', async () => {
    const t = useTag();
    expect(process.env.PATH, 'the host has a PATH').toBeTruthy();
    const proc = spawn('sh', tree(), { env: { [TAG_VAR]: t.tag, FOO: '1' }, stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    await out.until(/PID root \d+/);
    const pids = out.pids();
    for (const name of ['root', 'child']) {
      const env = await environOf(pids[name]!);
      expect(env[TAG_VAR], `${name} carries the tag`).toBe(t.tag);
      expect(env.FOO).toBe('1');
      expect(env.PATH, `${name} keeps the host's PATH`).toBe(process.env.PATH);
      if (process.env.HOME !== undefined) expect(env.HOME).toBe(process.env.HOME);
    }
    // Seen by /proc: both members (and the anchor, which gets the same environment) carry the tag.
    expect(t.procs().map((p) => p.pid)).toEqual(expect.arrayContaining([pids.root!, pids.child!, proc.anchorPid!]));
    await within(proc.terminate({ grace: 0 }), 10_000, 'terminate', t.tag);
    await waitGone(t, 5_000);
  });

  // proves nothing of the contract: the env option
  it("without env, the command gets the host's environment as it is at the spawn (set and deleted since)", async () => {
    const t = useTag();
    // Without `env` the addon copies the host's own environment (the C
    // library's, which process.env reads and writes on the main thread);
    // what the host changed in process.env since it started must be there.
    const saved = { [TAG_VAR]: process.env[TAG_VAR], CORDON_TEST_SET: process.env.CORDON_TEST_SET, CORDON_TEST_GONE: process.env.CORDON_TEST_GONE };
    onTestFinished(() => {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    });
    process.env[TAG_VAR] = t.tag;
    process.env.CORDON_TEST_GONE = 'here';
    process.env.CORDON_TEST_SET = 'one';
    // One spawn first: what a copy taken then would hold is not what the next one gets.
    const first = spawn('true', [], { stdio: 'ignore' });
    expect((await within(first.result, 10_000, 'the first spawn', t.tag)).exitCode).toBe(0);
    // (No space in it: the ps observer, on the model of XNU, splits an environment at spaces.)
    process.env.CORDON_TEST_SET = 'two=with-an-equals';
    delete process.env.CORDON_TEST_GONE;
    const proc = spawn('sh', tree(), { stdio: ['ignore', 'pipe', 'ignore'] });
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    const out = capture(proc.stdout);
    await out.until(/PID root \d+/);
    const env = await environOf(out.pids().root!);
    expect(env[TAG_VAR]).toBe(t.tag);
    expect(env.CORDON_TEST_SET).toBe('two=with-an-equals');
    expect(env).not.toHaveProperty('CORDON_TEST_GONE');
    expect(env.PATH).toBe(process.env.PATH);
    await within(proc.terminate({ grace: 0 }), 10_000, 'terminate', t.tag);
  });

  // proves nothing of the contract: the env option
  it('a variable set to undefined is unset; a caller value replaces the host one', async () => {
    const t = useTag();
    const proc = spawn('sh', tree(), { env: { [TAG_VAR]: t.tag, HOME: undefined, PATH: '/usr/bin:/bin' }, stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    await out.until(/PID root \d+/);
    const env = await environOf(out.pids().root!);
    expect(env).not.toHaveProperty('HOME');
    expect(env.PATH).toBe('/usr/bin:/bin');
    expect(env[TAG_VAR]).toBe(t.tag);
    await within(proc.terminate({ grace: 0 }), 10_000, 'terminate', t.tag);
  });

  // proves nothing of the contract: the extendEnv option
  it('extendEnv: false: env is the whole environment (no PATH, no HOME)', async () => {
    const t = useTag();
    const proc = spawn('sh', tree(), { env: { [TAG_VAR]: t.tag, FOO: 'only' }, extendEnv: false, stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    await out.until(/PID root \d+/);
    const env = await environOf(out.pids().root!);
    // (sh may add PWD, SHLVL and its own defaults; none of the host's own variables.)
    expect(env[TAG_VAR]).toBe(t.tag);
    expect(env.FOO).toBe('only');
    // The process-group and subreaper tiers add their tree's marker
    // (cordon's own, not the host's: README, "marked"; the subreaper tier's
    // is for the host's sweep if the anchor dies, anchorLossSwept); no other
    // tier adds anything.
    const marked = caps.guarantees.catchesEscapees === 'marked' || tier === 'subreaper';
    if (marked) expect(env.CORDON_TREE).toMatch(/^\d+\.\d+\.[0-9a-f]{32}$/);
    else expect(env.CORDON_TREE).toBeUndefined();
    const extra = Object.keys(env).filter((k) => ![TAG_VAR, 'FOO', 'PWD', 'SHLVL', '_', 'OLDPWD', ...(marked ? ['CORDON_TREE'] : [])].includes(k));
    expect(extra, 'none of the host\'s variables').toEqual([]);
    await within(proc.terminate({ grace: 0 }), 10_000, 'terminate', t.tag);
  });

  // proves nothing of the contract: the env options' input errors
  it('bad values are typed errors before anything runs', () => {
    const t = useTag();
    expect(() => spawn('sh', [], { env: t.env, extendEnv: 'yes' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(() => spawn('sh', [], { env: t.env, preferLocal: 1 as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(() => spawn('sh', [], { env: t.env, localDir: '/tmp' })).toThrow(/preferLocal/);
    expect(() => spawn('sh', [], { env: { FOO: 'a\0b' } })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    expect(t.procs()).toEqual([]);
  });
});

describe('preferLocal', () => {
  function project() {
    const root = tempDir('cordon-local-');
    const inner = join(root, 'pkg', 'sub');
    mkdirSync(join(root, 'node_modules', '.bin'), { recursive: true });
    mkdirSync(join(root, 'pkg', 'node_modules', '.bin'), { recursive: true });
    mkdirSync(inner, { recursive: true });
    // The same name at two levels: the nearest one wins.
    for (const [dir, says] of [[join(root, 'node_modules', '.bin'), 'outer'], [join(root, 'pkg', 'node_modules', '.bin'), 'inner']] as const) {
      const tool = join(dir, 'cordon-local-tool');
      writeFileSync(tool, `#!/bin/sh\necho "${says} $$"\nexec ${sleepCommand()} 300\n`);
      chmodSync(tool, 0o755);
    }
    return { root, inner };
  }

  // proves nothing of the contract: the preferLocal option
  it("runs cwd's nearest node_modules/.bin first; every level is on PATH", async () => {
    const t = useTag();
    const { root, inner } = project();
    const proc = spawn('cordon-local-tool', [], { cwd: inner, env: t.env, preferLocal: true, stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    const text = await out.until(/(inner|outer) \d+/);
    expect(text).toMatch(/^inner \d+/);
    const pid = Number(/(\d+)/.exec(text)![1]);
    const path = (await environOf(pid)).PATH!.split(':');
    expect(path.slice(0, 2)).toEqual([join(root, 'pkg', 'node_modules', '.bin'), join(root, 'node_modules', '.bin')]);
    expect(path.slice(2).join(':')).toBe(process.env.PATH);
    await within(proc.terminate({ grace: 0 }), 10_000, 'terminate', t.tag);
  });

  // proves nothing of the contract: the localDir option
  it('localDir chooses where the search starts; without preferLocal the tool is not found', async () => {
    const t = useTag();
    const { root, inner } = project();
    expect(() => spawn('cordon-local-tool', [], { cwd: inner, env: t.env })).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    const proc = spawn('cordon-local-tool', [], { cwd: inner, localDir: root, env: t.env, preferLocal: true, stdio: ['ignore', 'pipe', 'ignore'] });
    const out = capture(proc.stdout);
    expect(await out.until(/(inner|outer) \d+/)).toMatch(/^outer \d+/);
    await within(proc.terminate({ grace: 0 }), 10_000, 'terminate', t.tag);
  });
});
