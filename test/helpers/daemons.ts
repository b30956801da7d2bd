// Real daemonizing programs, as a user's command starts them: `setsid -f`, a
// node child spawned detached and unref()'d, a tmux server and ssh-agent
// (where installed). Each double-forks or setsid's at once, so no snapshot of
// the tree sees it as a descendant, and each keeps the environment it was
// given (so the test's tag, and the tree's marker). None holds the output.
// A test that starts them needs `setsid -f` (missing('setsid -f'), see
// requirements.ts); tmux and ssh-agent are added where the machine has them.
import { readFileSync } from 'node:fs';
import { fixtureProgram } from './compiled.js';
import { has } from './requirements.js';
import { environmentWithheld } from './tier.js';

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
 * how each one's command line starts. `byMarker`: see withSshAgent; for such
 * a tier, `unpromised` names those it does not promise here: where the
 * process table is XNU's, a daemon that runs a program whose environment the
 * kernel withholds (sleep, tmux, ssh-agent: Apple's, or in the model's
 * platform directories) and was forked by a process that exited before any
 * walk saw it (setsid -f's first process, node, daemon(3)'s first fork) is
 * found by neither the marker nor lineage (helpers/tier.ts). The compiled
 * fixture's daemon (where cc is here) runs a program of the suite's own,
 * whose marker every platform lets the anchor read.
 */
export function daemons(dir: string, keepRoot = false, byMarker = false): { script: string; names: string[]; unpromised: string[] } {
  const started: Array<{ line: string; names: string[]; program: string }> = [
    { line: 'setsid -f sleep 300 >/dev/null 2>&1', names: ['sleep 300'], program: 'sleep' },
    { line: `node -e "require('child_process').spawn('sleep', ['301'], { detached: true, stdio: 'ignore' }).unref()"`, names: ['sleep 301'], program: 'sleep' },
  ];
  if (has('tmux')) {
    started.push({ line: `tmux -S ${dir}/tmux.sock new-session -d 'sleep 302' </dev/null >/dev/null 2>&1`, names: ['tmux'], program: 'tmux' });
    started.push({ line: '', names: ['sleep 302'], program: 'sleep' });
  }
  if (withSshAgent(byMarker)) started.push({ line: `ssh-agent -a ${dir}/agent.sock >/dev/null 2>&1`, names: ['ssh-agent'], program: 'ssh-agent' });
  if (has('cc')) {
    const prog = fixtureProgram();
    started.push({ line: `${prog} setsid -f ${prog} sleep 303 >/dev/null 2>&1`, names: [`${prog} sleep 303`], program: prog });
  }
  const lines = started.map((d) => d.line).filter(Boolean);
  lines.push('echo READY');
  if (keepRoot) lines.push('exec sleep 299');
  const unpromised = started.filter((d) => byMarker && environmentWithheld(d.program)).flatMap((d) => d.names);
  return { script: lines.join('\n'), names: started.flatMap((d) => d.names), unpromised };
}
