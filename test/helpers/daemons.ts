// Real daemonizing programs, as a user's command starts them: `setsid -f`, a
// node child spawned detached and unref()'d, a tmux server and ssh-agent
// (where installed). Each double-forks or setsid's at once, so no snapshot of
// the tree sees it as a descendant, and each keeps the environment it was
// given (so the test's tag, and the tree's marker). None holds the output.
// A test that starts them needs `setsid -f` (missing('setsid -f'), see
// requirements.ts); tmux and ssh-agent are added where the machine has them.
import { readFileSync } from 'node:fs';
import { has } from './requirements.js';

/**
 * Whether this process can read the environment of a non-dumpable process of
 * its user (ssh-agent makes itself so): on Linux only as root or with
 * CAP_SYS_PTRACE (bit 19 of CapEff). Elsewhere not known here: taken as no.
 */
export const readsNonDumpable = (() => {
  if (process.platform !== 'linux') return false;
  if (process.getuid?.() === 0) return true;
  const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return m !== null && (BigInt(`0x${m[1]}`) & (1n << 19n)) !== 0n;
})();

/**
 * Whether ssh-agent is among the daemons: where installed, and, for a tier
 * that finds daemons by the tree's marker (`byMarker`), where its environment
 * is readable (else it escapes, as capabilities() says, and proves nothing).
 */
function withSshAgent(byMarker: boolean): boolean {
  return has('ssh-agent') && (!byMarker || readsNonDumpable);
}

/** The programs daemons() starts here, for a test's title. */
export function daemonTitle(byMarker = false): string {
  const agent = withSshAgent(byMarker)
    ? ', ssh-agent'
    : has('ssh-agent')
      ? '; not ssh-agent: non-dumpable, its environment is unreadable to this user'
      : '';
  return `setsid -f, node detached${has('tmux') ? ', tmux' : ''}${agent}`;
}

/**
 * A shell script that starts the daemons (their sockets in `dir`), then prints
 * READY (each launcher returns once its daemon is forked: they all exist,
 * tagged, by then), then `exec sleep 299` if `keepRoot`, else exits. `names`:
 * how each one's command line starts. `byMarker`: see withSshAgent.
 */
export function daemons(dir: string, keepRoot = false, byMarker = false): { script: string; names: string[] } {
  const lines = [
    'setsid -f sleep 300 >/dev/null 2>&1',
    `node -e "require('child_process').spawn('sleep', ['301'], { detached: true, stdio: 'ignore' }).unref()"`,
  ];
  const names = ['sleep 300', 'sleep 301'];
  if (has('tmux')) {
    lines.push(`tmux -S ${dir}/tmux.sock new-session -d 'sleep 302' </dev/null >/dev/null 2>&1`);
    names.push('tmux', 'sleep 302');
  }
  if (withSshAgent(byMarker)) {
    lines.push(`ssh-agent -a ${dir}/agent.sock >/dev/null 2>&1`);
    names.push('ssh-agent');
  }
  lines.push('echo READY');
  if (keepRoot) lines.push('exec sleep 299');
  return { script: lines.join('\n'), names };
}
