// A command run in a process group of its own (detached), its output
// collected, and the whole group SIGKILLed by its id past `timeoutMs`, and,
// with `endGroup`, once the command has closed (what it left in its group
// ends with it). The group's id is the pid of our own child, its leader, so
// no other process is signalled. Used by scripts/mutants.mjs and
// scripts/node-tests/source.mjs.
import { spawn } from 'node:child_process';

function killGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // the group is empty
  }
}

/**
 * Resolves { code, signal, timedOut, ms, stdout, stderr, all } (all: both
 * streams as they came; each kept to its last `keepChars` characters).
 */
export function runInGroup(cmd, args, { cwd, env, timeoutMs, endGroup = false, keepChars = Infinity }) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(cmd, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const text = { stdout: '', stderr: '', all: '' };
    const keep = (name, d) => {
      text[name] = (text[name] + d).slice(-keepChars);
      text.all = (text.all + d).slice(-keepChars);
    };
    child.stdout.on('data', (d) => keep('stdout', d));
    child.stderr.on('data', (d) => keep('stderr', d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
    }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (endGroup) killGroup(child.pid);
      resolve({ code, signal, timedOut, ms: Date.now() - started, ...text });
    });
  });
}
