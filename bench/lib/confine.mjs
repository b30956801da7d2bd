// cordon's `confine` beside bubblewrap (`--only confine`, Linux):
//   a. spawn to exit of `/bin/true` and of `sh -c 'echo ok > "$BENCH_WRITE_DIR/out"'`,
//      interleaved (bench/lib/overhead.mjs): child_process; cordon; cordon with
//      confine { write: [dir], network: 'all' } and 'none'; child_process
//      spawning bwrap with the same policy (read-only /, the devices, the dir
//      writable, --unshare-net for 'none', --die-with-parent), and with
//      --unshare-pid besides;
//   b. the policy, checked once per approach: a write in the dir, a write in a
//      directory beside it, a TCP connect to a listener of this process on
//      127.0.0.1 (accepts counted by the listener);
//   c. a `setsid` escapee, observed from outside by its tag in /proc: left
//      2 s after its host (bench/host.mjs) was SIGKILLed; left 1 s after the
//      root exited by itself and the completion settled.
// bwrap comes from the OS (Debian: apt-get install bubblewrap); where it is
// missing or cannot run, its rows are skipped with the reason. A network
// namespace needs CAP_SYS_ADMIN (cordon) or one of bwrap's ways to get it;
// where either refuses, that row is skipped with the reason.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn as cordonSpawn } from '../../dist/index.js';
import { plainStart, settleTime, watchOutput } from './libraries.mjs';
import { measureOverhead } from './overhead.mjs';
import { findTagged, killTagged, newTag, sleep, taggedEnv } from './procs.mjs';

/** The allowed directory, from the tree's environment (so that bench/host.mjs can start an approach too). */
const WRITE_DIR = 'BENCH_WRITE_DIR';

const COMMANDS = {
  true: { title: '`/bin/true`', file: '/bin/true', args: [] },
  write: { title: '`sh -c \'echo ok > "$BENCH_WRITE_DIR/out"\'` (a write in the allowed directory)', file: 'sh', args: ['-c', `echo ok > "$${WRITE_DIR}/out"`] },
};

/** bwrap's arguments for the policy: / read-only, a /dev of the usual devices, the dir writable. */
function bwrapArgs(dir, { net = false, pid = false } = {}) {
  return ['--ro-bind', '/', '/', '--dev', '/dev', '--bind', dir, dir, ...(net ? ['--unshare-net'] : []), ...(pid ? ['--unshare-pid'] : []), '--die-with-parent', '--'];
}

function cordonStart(network) {
  return (command, args, env) => {
    const confine = network ? { confine: { write: [env[WRITE_DIR]], network } } : {};
    const proc = cordonSpawn(command, args, { env, ...confine });
    const out = watchOutput(proc.stdout, proc.stderr);
    const completion = settleTime(proc.result).then((s) => ({ ...s, code: s.ok ? s.value.exitCode : s.error.exitCode ?? s.error.code }));
    return { out, completion, rootPid: () => proc.pid };
  };
}

function plain(file, prefix) {
  return (command, args, env) => {
    const h = plainStart(file ?? command, [...(prefix ? prefix(env[WRITE_DIR]) : []), ...(file ? [command] : []), ...args], env);
    let err = '';
    h.child.stderr.setEncoding('utf8').on('data', (c) => (err = (err + c).slice(-500)));
    const completion = h.completion.then((s) => ({ ...s, code: s.ok ? s.value.code ?? s.value.signal : s.error.code, stderr: err }));
    return { ...h, completion };
  };
}

/** Every approach: name -> { how, start(command, args, env) -> { out, completion, rootPid } }. */
export const APPROACHES = {
  child_process: { how: 'spawn()', start: plain() },
  cordon: { how: 'spawn()', start: cordonStart() },
  "cordon confine 'all'": { how: "spawn(..., { confine: { write: [dir], network: 'all' } })", start: cordonStart('all') },
  "cordon confine 'none'": { how: "spawn(..., { confine: { write: [dir], network: 'none' } })", net: true, start: cordonStart('none') },
  bwrap: { how: `spawn('bwrap', [${bwrapArgs('dir').join(' ')} cmd])`, bwrap: true, start: plain('bwrap', (d) => bwrapArgs(d)) },
  'bwrap --unshare-net': { how: 'the same with --unshare-net', bwrap: true, net: true, start: plain('bwrap', (d) => bwrapArgs(d, { net: true })) },
  'bwrap --unshare-pid': { how: 'the same as bwrap with --unshare-pid', bwrap: true, start: plain('bwrap', (d) => bwrapArgs(d, { pid: true })) },
};

/** The approach of that name, for bench/host.mjs; undefined for another name. */
export function approach(name) {
  return APPROACHES[name];
}

function firstLine(s) {
  return String(s).trim().split('\n')[0].slice(0, 200);
}

/** Why an approach cannot run here (a probe of `/bin/true` under it), or undefined. */
async function unavailable(name, env) {
  const a = APPROACHES[name];
  if (a.bwrap) {
    try {
      execFileSync('bwrap', ['--version'], { stdio: 'pipe' });
    } catch {
      return 'bwrap not installed (Debian: apt-get install bubblewrap)';
    }
  }
  const s = await a.start('/bin/true', [], env).completion;
  if (s.code === 0) return undefined;
  return `a probe of /bin/true failed: ${s.ok ? `exit ${s.code}${s.stderr ? `: ${firstLine(s.stderr)}` : ''}` : firstLine(s.error?.message ?? s.error)}`;
}

/** b. The policy as the tree meets it: exit codes and files seen from outside, accepts counted by the listener. */
async function policyCheck(name, env, dir, beside, port, accepts) {
  const a = APPROACHES[name];
  const run = async (command, args) => (await a.start(command, args, env).completion).code;
  const tag = name.replace(/[^A-Za-z0-9]/g, '');
  const inside = join(dir, `in-${tag}`);
  const outside = join(beside, `out-${tag}`);
  await run('sh', ['-c', `echo ok > ${inside}`]);
  await run('sh', ['-c', `echo no > ${outside}`]);
  const before = accepts();
  const connectCode = await run(process.execPath, ['-e', `require('net').connect(${port}, '127.0.0.1').on('connect', () => process.exit(0)).on('error', () => process.exit(3))`]);
  return { writeInside: existsSync(inside), writeBeside: existsSync(outside), connected: accepts() > before, connectCode };
}

const HOST = fileURLToPath(new URL('../host.mjs', import.meta.url));
const ESCAPEE = 'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo READY';

/** c1. A host starts the approach's tree (root waiting, a setsid escapee beside it) and is SIGKILLed: tagged processes left 2 s later. */
async function hostKilled(name, env, log) {
  const tag = env.CORDON_BENCH_TAG;
  const host = plainStart(process.execPath, [HOST, name, `${ESCAPEE}; exec sleep 300`], env);
  try {
    const deadline = performance.now() + 15_000;
    while (!/^READY$/m.test(host.out.text)) {
      if (performance.now() > deadline) throw new Error('the host printed no READY within 15 s');
      await sleep(5);
    }
    const before = findTagged({ tag, maxAgeMs: 0 }).filter((p) => p.pid !== host.child.pid).length;
    const t0 = performance.now();
    process.kill(host.child.pid, 'SIGKILL');
    let quietMs = null;
    while (performance.now() - t0 < 2000) {
      if (findTagged({ tag, maxAgeMs: 0 }).length === 0) {
        quietMs = performance.now() - t0;
        break;
      }
      await sleep(5);
    }
    const left = findTagged({ tag, maxAgeMs: 0 });
    return { before, left: left.length, quietMs };
  } catch (err) {
    log(`${name}: host SIGKILLed: ${err.message}`);
    return { error: err.message };
  } finally {
    killTagged({ tag });
  }
}

/** c2. The root starts a setsid escapee and exits 0: tagged processes left 1 s after the completion settled. */
async function rootExited(name, env) {
  const tag = env.CORDON_BENCH_TAG;
  try {
    const h = APPROACHES[name].start('sh', ['-c', ESCAPEE], env);
    const s = await h.completion;
    await sleep(1000);
    return { code: s.code, left: findTagged({ tag, maxAgeMs: 0 }).length };
  } finally {
    killTagged({ tag });
  }
}

export async function measureConfine({ runs = 100, log = () => {} } = {}) {
  if (process.platform !== 'linux') return { skipped: `confine and bwrap are Linux only (this is ${process.platform})` };
  const dir = mkdtempSync(join(tmpdir(), 'cordon-bench-confine-'));
  const beside = mkdtempSync(join(tmpdir(), 'cordon-bench-beside-'));
  const server = createServer((s) => (accepted++, s.destroy()));
  let accepted = 0;
  try {
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    const port = server.address().port;
    const envOf = (label) => taggedEnv(newTag(label), { [WRITE_DIR]: dir });
    const res = { approaches: [], skipped: {}, bwrapVersion: undefined, timing: {}, policy: {}, escapes: {} };
    try {
      res.bwrapVersion = execFileSync('bwrap', ['--version'], { encoding: 'utf8', stdio: 'pipe' }).trim();
    } catch {
      // reported by the probe of each bwrap row
    }
    for (const name of Object.keys(APPROACHES)) {
      const env = envOf('confineprobe');
      const why = await unavailable(name, env);
      killTagged({ tag: env.CORDON_BENCH_TAG });
      if (why) {
        res.skipped[name] = why;
        log(`${name}: skipped: ${why}`);
      } else res.approaches.push({ name, how: APPROACHES[name].how });
    }
    const names = res.approaches.map((a) => a.name);
    for (const [id, cmd] of Object.entries(COMMANDS)) {
      log(`${id}: ${runs} sequential + ${runs} 8-way concurrent runs of ${names.join(', ')}`);
      const env = envOf(`confine${id}`);
      const impls = Object.fromEntries(names.map((n) => [n, () => APPROACHES[n].start(cmd.file, cmd.args, env).completion]));
      res.timing[id] = { title: cmd.title, ...(await measureOverhead({ env, impls, runs, onProgress: (s) => log(`${id}: ${s}`) })) };
      const left = killTagged({ tag: env.CORDON_BENCH_TAG });
      if (left.length > 0) res.timing[id].leftBehind = left.length;
    }
    log('the policy, once per approach');
    for (const n of names) {
      const env = envOf('confinepolicy');
      res.policy[n] = await policyCheck(n, env, dir, beside, port, () => accepted);
      killTagged({ tag: env.CORDON_BENCH_TAG });
    }
    log('a setsid escapee: the host SIGKILLed; the root exiting by itself');
    for (const n of names.filter((x) => x !== 'child_process' && x !== 'cordon' && !APPROACHES[x].net)) {
      res.escapes[n] = { hostKilled: await hostKilled(n, envOf('confinehost'), log), rootExited: await rootExited(n, envOf('confineexit')) };
    }
    return res;
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(beside, { recursive: true, force: true });
  }
}
