// Real daemonizing programs, as a user's command starts them: `setsid -f`, a
// node child spawned detached and unref()'d, a tmux server and ssh-agent
// (where installed). Each double-forks or setsid's at once, so no snapshot of
// the tree sees it as a descendant, and each keeps the environment it was
// given (so the test's tag, and the tree's marker). None holds the output.
import { execFileSync } from 'node:child_process';

/** Whether `program` is on PATH. */
export function has(program: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${program}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The programs this machine has, for a test's title. */
export const daemonTitle = `setsid -f, node detached${has('tmux') ? ', tmux' : ''}${has('ssh-agent') ? ', ssh-agent' : ''}`;

/**
 * A shell script that starts the daemons (their sockets in `dir`), then prints
 * READY (each launcher returns once its daemon is forked: they all exist,
 * tagged, by then), then `exec sleep 299` if `keepRoot`, else exits. `names`:
 * how each one's command line starts.
 */
export function daemons(dir: string, keepRoot = false): { script: string; names: string[] } {
  const lines = [
    'setsid -f sleep 300 >/dev/null 2>&1',
    `node -e "require('child_process').spawn('sleep', ['301'], { detached: true, stdio: 'ignore' }).unref()"`,
  ];
  const names = ['sleep 300', 'sleep 301'];
  if (has('tmux')) {
    lines.push(`tmux -S ${dir}/tmux.sock new-session -d 'sleep 302' </dev/null >/dev/null 2>&1`);
    names.push('tmux', 'sleep 302');
  }
  if (has('ssh-agent')) {
    lines.push(`ssh-agent -a ${dir}/agent.sock >/dev/null 2>&1`);
    names.push('ssh-agent');
  }
  lines.push('echo READY');
  if (keepRoot) lines.push('exec sleep 299');
  return { script: lines.join('\n'), names };
}
