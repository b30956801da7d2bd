// The markdown of the confine section (run.confine, from bench/lib/confine.mjs's measureConfine).
import { fmtMs, overheadTable } from './format.mjs';

const yes = (b, ifTrue, ifFalse) => (b ? ifTrue : ifFalse);

function escapeCell(e) {
  if (!e) return '–';
  if (e.error) return `error: ${e.error}`;
  return `**${e.left}**${e.quietMs !== undefined ? (e.quietMs === null ? ' (still there after 2 s; then SIGKILLed by pid)' : ` (all gone ${fmtMs(e.quietMs)} after the SIGKILL)`) : ''}`;
}

/** Short notes, each only where this run measured what it says. */
function notes(c) {
  const out = [];
  const host = (n) => c.escapes[n]?.hostKilled;
  const exit = (n) => c.escapes[n]?.rootExited;
  const cordon = "cordon confine 'all'";
  if (host('bwrap')?.left > 0 && host(cordon)?.left === 0) {
    out.push(
      "A `setsid` escapee of the bwrap'd command outlived its SIGKILLed host (`--die-with-parent` is a parent-death signal for bwrap and the command, " +
        "which their own children do not inherit); cordon's anchor ended the confined tree's escapee with its host.",
    );
  }
  if (host('bwrap --unshare-pid')?.left === 0) {
    out.push(
      'With `--unshare-pid`, bwrap ended the escapee with its SIGKILLed host: when the first process of a pid namespace dies, the kernel kills every member.',
    );
  }
  if (exit('bwrap')?.left > 0 && exit(cordon)?.left === 0) {
    out.push(
      "When the root exits by itself, bwrap (without a pid namespace) returns and leaves its escapee running; cordon's default `leftovers: 'kill'` ended it before the result settled.",
    );
  }
  const p = c.policy;
  if (p[cordon]?.connected && p.bwrap?.connected && p["cordon confine 'none'"] && !p["cordon confine 'none'"].connected && p['bwrap --unshare-net'] && !p['bwrap --unshare-net'].connected) {
    out.push("Network: with `'all'` / no flag both reach the host's 127.0.0.1; with `'none'` / `--unshare-net` neither does (a network namespace of the tree's own either way).");
  }
  return out;
}

export function confineMarkdown(c) {
  const lines = ['', '## confine beside bubblewrap', ''];
  if (c.skipped && typeof c.skipped === 'string') return [...lines, `Skipped: ${c.skipped}.`];
  lines.push(
    `Spawn to exit of a short command, interleaved in one run as in the overhead section, each approach given the same policy: ` +
      "the allowed directory `dir` writable, everything else read-only (cordon `confine: { write: [dir] }`; " +
      '`bwrap --ro-bind / / --dev /dev --bind dir dir --die-with-parent`), the network the host\'s (`\'all\'`, no flag) or none ' +
      "(`'none'`, `--unshare-net`). cordon's confined tree also gets a temp dir of its own (`TMPDIR`, made and removed per tree); the bwrap rows do not. " +
      `bwrap: ${c.bwrapVersion ?? 'not found'}. Ratios are to plain child_process in the same run.`,
  );
  for (const [name, why] of Object.entries(c.skipped ?? {})) lines.push('', `${name}: skipped: ${why}.`);
  for (const t of Object.values(c.timing)) {
    lines.push('', `${t.title}:`, '', ...overheadTable(t));
    if (t.leftBehind) lines.push('', `${t.leftBehind} processes left behind (SIGKILLed by pid).`);
  }
  lines.push('', "The policy as each tree met it (once each; files seen from outside, the listener's accepts counted):", '');
  lines.push('| approach | write in `dir` | write in a directory beside it | TCP connect to a listener of the host on 127.0.0.1 |');
  lines.push('| --- | --- | --- | --- |');
  for (const [name, p] of Object.entries(c.policy)) {
    lines.push(`| ${name} | ${yes(p.writeInside, 'written', 'not written')} | ${yes(p.writeBeside, 'written', 'refused')} | ${yes(p.connected, 'accepted', `refused (exit ${p.connectCode})`)} |`);
  }
  lines.push('', 'A `setsid` escapee (`setsid sleep 300 &`), counted by its tag in /proc from outside:', '');
  lines.push('| approach | host SIGKILLed while the root runs: left 2 s later | the root exits 0 by itself: left 1 s after the completion |');
  lines.push('| --- | --- | --- |');
  for (const [name, e] of Object.entries(c.escapes)) {
    const x = e.rootExited;
    lines.push(`| ${name} | ${escapeCell(e.hostKilled)} | ${x ? `**${x.left}** (exit ${x.code})` : '–'} |`);
  }
  const n = notes(c);
  if (n.length > 0) lines.push('', ...n.map((s) => `- ${s}`));
  return lines;
}
