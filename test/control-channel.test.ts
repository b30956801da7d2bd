// The control channel (design; CONTRACT C1): the anchor talks to the host over
// a socket on its fd 3, which it must not hand down. The command, and any
// process it starts, sees only its stdin, stdout and stderr.
import { execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { spawn } from '../lib/index.js';
import { useTag, within } from './helpers/procs.js';
import { observer } from './helpers/observer.js';
import { missing } from './helpers/requirements.js';
import { itWhere } from './helpers/tier.js';
import { collect, fdTable, parseLsFd } from './helpers/trees.js';

/** `ls -l` of a descriptor directory, between two marker lines, parsed. */
function listing(text: string, name: string): Map<number, string> {
  const m = new RegExp(`^${name}-FDS(?: \\d+)?\\n([\\s\\S]*?)^END-${name}-FDS$`, 'm').exec(text);
  if (!m) throw new Error(`no ${name} listing in:\n${text}`);
  const fds = parseLsFd(m[1]!);
  // The descriptor `ls` opened to read the directory is not the listed process's.
  for (const [fd, target] of fds) if (fd > 2 && /^\/proc\/\d+\/fd$/.test(target)) fds.delete(fd);
  return fds;
}

function sockets(fds: Map<number, string>): string[] {
  return [...fds].filter(([, target]) => target.startsWith('socket:')).map(([fd, target]) => `${fd} -> ${target}`);
}

function describeFds(fds: Map<number, string>): string {
  return [...fds].map(([fd, target]) => `${fd} -> ${target}`).join(', ') || '(none)';
}

function keys(fds: Map<number, string>): number[] {
  return [...fds.keys()].sort((a, b) => a - b);
}

describe('the control channel is not handed down', () => {
  // Also read from outside: the descriptor tables of the anchor, the root and
  // the grandchild, which only the proc observer can list.
  // proves C1: the command starts with nothing of the anchor's
  itWhere(observer.name === 'proc', "neither the root nor a grandchild holds the anchor's control socket", `the ${observer.name} observer cannot list another process's descriptors (only /proc can)`, async () => {
    const t = useTag();
    // The root lists its own table, a grandchild (a shell inside a shell)
    // lists its own (/proc/self/fd), then both stay alive to be read from outside.
    const inner = 'echo "PID grandchild $$"; echo "GC-FDS $$"; ls -l /proc/self/fd; echo "END-GC-FDS"; echo READY; exec sleep 300';
    const script = [
      'echo "PID root $$"',
      'echo "ROOT-FDS $$"; ls -l /proc/$$/fd; echo "END-ROOT-FDS"',
      'sh -c \'sh -c "$INNER" & wait\' &',
      'wait',
    ].join('\n');
    const proc = spawn('sh', ['-c', script], { env: { ...t.env, INNER: inner } });
    const { root, pids, out } = await collect(proc, t.tag);
    const grandchild = pids.grandchild!;
    // Read from outside while the tree runs.
    const anchorFds = fdTable(proc.anchorPid!);
    const now = { root: fdTable(root), grandchild: fdTable(grandchild) };
    await within(proc.kill(), 10_000, 'kill() to resolve', t.tag);

    // Precondition: the anchor's fd 3 is the control socket, which could leak.
    const control = anchorFds.get(3);
    expect(control, `anchor fds: ${describeFds(anchorFds)}`).toMatch(/^socket:\[\d+\]$/);
    const seen = { root: listing(out.text, 'ROOT'), grandchild: listing(out.text, 'GC') };
    for (const [name, fds] of [
      ['root (its listing)', seen.root],
      ['grandchild (its listing)', seen.grandchild],
      ['root (from outside)', now.root],
      ['grandchild (from outside)', now.grandchild],
    ] as const) {
      expect([...fds.values()], `${name} holds the control socket: ${describeFds(fds)}`).not.toContain(control);
      // Beyond stdio (the host's pipes), no socket at all.
      expect(sockets(new Map([...fds].filter(([fd]) => fd > 2))), `${name}: sockets beyond stdio`).toEqual([]);
    }
  });

  // The members list their own descriptor links (ls -l /proc/<pid>/fd): Linux only.
  const linksWhy = process.platform === 'linux' ? '' : 'the members list their descriptor links from /proc/<pid>/fd, which only Linux has';
  // proves C1: the command starts with nothing of the anchor's
  itWhere(linksWhy === '', 'the root, a child and a grandchild see only fds 0, 1 and 2', linksWhy, async () => {
    const t = useTag();
    const script = [
      'echo "ROOT-FDS $$"; ls -l /proc/$$/fd; echo "END-ROOT-FDS"',
      'echo "CHILD-FDS"; ls -l /proc/self/fd; echo "END-CHILD-FDS"',
      'sh -c \'echo "GC-FDS"; ls -l /proc/self/fd; echo "END-GC-FDS"; :\'',
    ].join('\n');
    const proc = spawn('sh', ['-c', script], { env: t.env });
    const { out } = await collect(proc, t.tag, { ready: /^END-GC-FDS$/m });
    const result = await within(proc.result, 10_000, 'the listings to finish', t.tag);
    expect(result.exitCode).toBe(0);
    for (const name of ['ROOT', 'CHILD', 'GC']) {
      const fds = listing(out.text, name);
      expect(keys(fds), `${name} fds: ${describeFds(fds)}`).toEqual([0, 1, 2]);
    }
    expect(t.procs()).toEqual([]);
  });
});

// The control socket's buffers are asked for at 256 KiB each way (macOS
// gives a Unix socket pair 8 KiB, and the anchor's writes of a large tree's
// LEFT lines must not stall it while the host reads late). Read from outside
// with ss: the kernel reports twice what a process asked for, capped by
// net.core.[rw]mem_max, so the expected sizes follow this machine's caps.
describe("the control socket's buffers", () => {
  const noSs = missing('ss') ?? '';
  // proves nothing of the contract: the control socket's buffer sizes, a design choice
  itWhere(noSs === '' && observer.name === 'proc', "the anchor's end has 256 KiB send and receive buffers (as ss -xm reads them)", noSs || 'needs /proc to find the socket of the anchor\'s fd 3', async () => {
    const t = useTag();
    const proc = spawn('sh', ['-c', 'echo READY; exec sleep 300'], { env: t.env });
    await collect(proc, t.tag);
    const link = readlinkSync(`/proc/${proc.anchorPid}/fd/3`);
    const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
    expect(inode, link).toBeDefined();
    const line = execFileSync('ss', ['-xmH'], { encoding: 'utf8' })
      .split('\n')
      .find((l) => new RegExp(`\\s\\*\\s+${inode}\\s`).test(l));
    expect(line, `ss -xm has no line for socket ${inode}`).toBeDefined();
    const mem = /skmem:\(r\d+,rb(\d+),t\d+,tb(\d+)/.exec(line!);
    expect(mem, line).not.toBeNull();
    const asked = 256 * 1024;
    const cap = (name: string) => Number(readFileSync(`/proc/sys/net/core/${name}`, 'utf8'));
    expect(Number(mem![1]), 'receive buffer').toBe(2 * Math.min(asked, cap('rmem_max')));
    expect(Number(mem![2]), 'send buffer').toBe(2 * Math.min(asked, cap('wmem_max')));
    await within(proc.terminate(), 10_000, 'terminate()', t.tag);
  });
});
