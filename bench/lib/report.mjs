// Markdown and a hand-written SVG chart from one benchmark run's JSON.
import { confineMarkdown } from './confine-report.mjs';
import { fmtMs, overheadTable } from './format.mjs';
import { ptyMarkdown } from './pty-report.mjs';
import { scaleRatios, stormRatios } from './scale.mjs';

function cell(t) {
  if (t.error) return `error: ${t.error}`;
  const settled = t.settledMs === undefined ? 'n/a' : fmtMs(t.settledMs);
  const quiet = fmtMs(t.quiescentMs);
  return `${t.leftBehind} / ${settled} / ${quiet}${t.note ? ` (${t.note})` : ''}`;
}

function median(values) {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  return s[(s.length - 1) >> 1];
}

export function summarize(run) {
  return run.libraries.map((lib) => {
    const ts = run.trials.filter((t) => t.library === lib.name);
    const withSettle = ts.filter((t) => t.settledMs !== undefined);
    return {
      library: lib.name,
      leftBehind: ts.reduce((n, t) => n + (t.leftBehind ?? 0), 0),
      scenariosLeaking: ts.filter((t) => t.leftBehind > 0 || t.error).length,
      scenarios: ts.length,
      neverSettled: withSettle.filter((t) => t.settledMs === null).length,
      settleScenarios: withSettle.length,
      neverQuiet: ts.filter((t) => t.quiescentMs === null).length,
      medianQuietMs: median(ts.filter((t) => t.quiescentMs !== null).map((t) => t.quiescentMs)),
    };
  });
}

export function markdown(run) {
  const libs = run.libraries.map((l) => l.name);
  const m = run.machine;
  const lines = [];
  lines.push(`# cordon benchmark, ${run.date}`);
  lines.push('');
  lines.push(
    `Machine: ${m.cpus} CPUs (${m.model}), Linux ${m.kernel}, Node ${m.node} (${m.platform}); ` +
      `cordon tier: ${run.cordonTier}; execa ${run.versions.execa}, tree-kill ${run.versions['tree-kill']}` +
      (run.execa10?.version ? `, execa ${run.execa10.version} (${run.execa10.mode === 'peer' ? `in a peer under Node ${run.execa10.node}` : 'in-process'})` : '') +
      '. ' +
      (run.execa10?.skipped ? `execa 10: ${run.execa10.skipped}. ` : '') +
      `Bound: ${run.options.bound / 1000} s per trial. Whole run: ${(run.durationMs / 1000).toFixed(0)} s. ` +
      `Load average (1/5/15 min) at start ${run.loadavgAtStart?.join(' / ')}, at end ${run.loadavgAtEnd?.join(' / ')}.`,
  );
  if (run.ballast) {
    lines.push('');
    lines.push(`Ballast during the overhead and the scenarios: ${run.ballast.processes} idle processes (\`--ballast\`; ${run.ballast.hostProcesses} processes on the host).`);
  }
  if (run.trials.length > 0) {
    lines.push('');
    lines.push('## Stopping a tree');
    lines.push('');
    lines.push(
      'Each cell: **processes left behind** (tagged processes still alive when the bound ran out; the benchmark then ' +
        'SIGKILLed them) / **completion settled** (what a caller awaits: cordon `proc.result`, child_process `close`, the ' +
        "execa promise; time from t0, `never` = not within the bound) / **quiescent** (time from t0 until no tagged " +
        'process was alive). t0 is the stop call, the root\'s exit (no stop call) or the host\'s SIGKILL.',
    );
    lines.push('');
    lines.push(`| scenario | ${libs.join(' | ')} |`);
    lines.push(`| --- | ${libs.map(() => '---').join(' | ')} |`);
    for (const sc of run.scenarios) {
      const row = libs.map((name) => {
        const t = run.trials.find((x) => x.library === name && x.scenario === sc.id);
        return t ? cell(t) : '–';
      });
      lines.push(`| ${sc.title} | ${row.join(' | ')} |`);
    }
    lines.push('');
    lines.push('| library | stopped with | left behind (total) | scenarios with leftovers | completion never settled | never quiescent | median time to quiescence, where reached |');
    lines.push('| --- | --- | --- | --- | --- | --- | --- |');
    for (const s of summarize(run)) {
      const how = run.libraries.find((l) => l.name === s.library).how;
      lines.push(
        `| ${s.library} | ${how} | ${s.leftBehind} | ${s.scenariosLeaking} of ${s.scenarios} | ${s.neverSettled} of ${s.settleScenarios} | ` +
          `${s.neverQuiet} of ${s.scenarios} | ${fmtMs(s.medianQuietMs)} |`,
      );
    }
    lines.push('');
    lines.push('Scenarios:');
    lines.push('');
    for (const sc of run.scenarios) lines.push(`- **${sc.title}**: ${sc.detail}.`);
  }
  const o = run.overhead;
  if (o) {
    lines.push('');
    lines.push('## Overhead: spawn to exit of `/bin/true`');
    lines.push('');
    lines.push(
      `${o.sequentialRuns} sequential runs and ${o.concurrentRuns} runs 8 at a time per library, interleaved, after ` +
        `${o.warmup} warm-up runs; default options (stdio pipes), awaiting cordon \`proc.result\`, child_process \`close\`, ` +
        'the execa promise. Ratios are to plain child_process in the same run. `cordon (limits)` (where the host ' +
        "enforces limits) is the same spawn with `limits: { memory: '256M', processes: 100, cpu: 1 }`.",
    );
    lines.push('');
    lines.push(...overheadTable(o));
    const seq = o.sequential.find((r) => r.library === 'cordon');
    if (seq) {
      lines.push('');
      lines.push(
        `Target (cordon at most 1.25x plain child_process, sequential, median): ` +
          `${seq.medianRatio <= 1.25 ? '**met**' : '**not met**'} (${seq.medianRatio.toFixed(2)}x).`,
      );
    }
  }
  const ad = run.adoption;
  if (ad) {
    lines.push('');
    lines.push('## Adoption of a leased tree');
    lines.push('');
    lines.push(
      `A host spawns \`sleep 60\` with a lease and is SIGKILLed; this process adopts the tree (\`registry.adopt()\`: ` +
        `the endpoint's connect, \`ADOPT\`, the replay up to READY), ${ad.runs} times: median ${fmtMs(ad.median)}, p95 ${fmtMs(ad.p95)}` +
        `${ad.leftBehind ? ` (${ad.leftBehind} processes left behind)` : ''}.`,
    );
  }
  if (run.pty) lines.push(...ptyMarkdown(run.pty));
  if (run.confine) lines.push(...confineMarkdown(run.confine));
  if (run.scale) lines.push(...scaleMarkdown(run));
  lines.push('');
  return lines.join('\n');
}

const x = (r) => (r === null || r === undefined ? '–' : `${r.toFixed(2)}x`);
const verdict = (ok) => (ok ? '**met**' : '**not met**');

function scaleMarkdown(run) {
  const sc = run.scale;
  const lines = [];
  const methods = sc.methods.map((m) => m.name);
  lines.push('');
  lines.push('## Scale: stopping trees on a busy host');
  lines.push('');
  lines.push(
    `Ballast: idle unrelated processes (\`sleep 100000\`) started before the cell; host processes listed in /proc at each level: ` +
      sc.levels.map((l) => `${l.ballast} → ${l.hostProcesses}`).join(', ') +
      `. Trees of 4 processes (\`sh\`, a \`sleep\`, a child \`sh\` with its \`sleep\`), all stopped in one loop at t0; ` +
      `a single tree is stopped ${sc.reps} times (median), more trees once. Each cell: **settled** (the last completion) / ` +
      '**quiescent** (every printed pid gone) / for cordon, the **anchor CPU per tree** from t0 until the anchor is gone ' +
      '(`/proc/<anchorPid>/schedstat`, sampled every 4 ms, 1 ms while at most 5 live; a lower bound short of at most one interval unless the anchor was caught as a zombie: the share caught so is in the JSON) and in brackets the host\'s Δcutime+cstime per ' +
      "tree (the anchors' whole lives and what they reaped; for the group kill, the trees themselves).",
  );
  lines.push('');
  lines.push(`| trees | ballast | ${methods.join(' | ')} |`);
  lines.push(`| --- | --- | ${methods.map(() => '---').join(' | ')} |`);
  for (const trees of sc.treeCounts) {
    for (const lvl of sc.levels) {
      const row = methods.map((name) => {
        const c = sc.cells.find((k) => k.method === name && k.ballast === lvl.ballast && k.trees === trees);
        if (!c) return '–';
        let t = `${fmtMs(c.settledMs)} / ${fmtMs(c.quiescentMs)}`;
        if (c.anchorCpuMsPerTree !== null && c.anchorCpuMsPerTree !== undefined) t += ` / CPU ${fmtMs(c.anchorCpuMsPerTree)}`;
        if (c.hostCpuMsPerTree !== null && c.hostCpuMsPerTree !== undefined) t += ` (${fmtMs(c.hostCpuMsPerTree)})`;
        if (c.late > 0) t += `, ${c.late} of ${c.results} late`;
        if (c.zombies > 0) t += `, ${c.zombies} zombies`;
        if (c.initZombies > 0) t += `, ${c.initZombies} zombies of init`;
        if (c.leftBehind > 0) t += `, ${c.leftBehind} left`;
        if (c.errors.length > 0) t += `, error: ${c.errors[0]}`;
        return t;
      });
      lines.push(`| ${trees} | ${lvl.ballast} | ${row.join(' | ')} |`);
    }
  }
  if (sc.storm) {
    lines.push('');
    lines.push(
      `Fork storm (test/fixtures/fork-storm.sh's: a doubling fork bomb of depth 6 beside a loop starting \`sh -c 'sleep 300 & sleep 300'\` as fast as it can), ` +
        `stopped once more than ${sc.storm.mid} of its processes are counted, ${sc.storm.reps} times per method (median), without ballast ` +
        `(${sc.storm.hostProcesses} host processes); quiescent: no process with the storm's tag left (a walk of /proc every 5 ms).`,
    );
    lines.push('');
    lines.push('| fork storm | settled | quiescent | members at t0 (peak) | late | left |');
    lines.push('| --- | --- | --- | --- | --- | --- |');
    for (const c of sc.storm.cells) {
      lines.push(`| ${c.method} | ${fmtMs(c.settledMs)} | ${fmtMs(c.quiescentMs)} | ${c.membersAtStop} (${c.peakMembers}) | ${c.late} | ${c.leftBehind}${c.errors.length ? `, error: ${c.errors[0]}` : ''} |`);
    }
  }
  const r = scaleRatios(sc);
  lines.push('');
  lines.push('| ratio | settled | quiescent |');
  lines.push('| --- | --- | --- |');
  for (const b of r.byBallast) lines.push(`| ${b.method}, ${b.trees} tree(s): ballast ${r.hi} / ballast ${r.lo} | ${x(b.settled)} | ${x(b.quiescent)} |`);
  for (const v of r.vsGroup) lines.push(`| ${v.method} / group kill, ${v.trees} trees, ballast ${v.ballast} | ${x(v.settled)} | ${x(v.quiescent)} |`);
  const storm = stormRatios(sc.storm);
  for (const v of storm) lines.push(`| ${v.method} / group kill, fork storm | ${x(v.settled)} | ${x(v.quiescent)} |`);
  // Issue #13's goals.
  const worst = (list) => (list.length === 0 ? null : Math.max(...list.map((v) => Math.max(v.settled ?? Infinity, v.quiescent ?? Infinity))));
  const goals = [];
  for (const [tier, bound] of [['cgroup', 1.2], ['subreaper', 2]]) {
    const w = worst(r.byBallast.filter((b) => b.method === tier));
    if (w !== null) goals.push(`${tier} tier, latency at ballast ${r.hi} within ${bound}x of ballast ${r.lo} (every tree count, settled and quiescent): ${verdict(w <= bound)} (worst ${x(w)})`);
  }
  for (const tier of ['cgroup', 'subreaper']) {
    const w = worst(r.vsGroup.filter((v) => v.method === tier && v.trees === 50));
    if (w !== null) goals.push(`${tier} tier, 50 trees within 1.5x of the group kill (every ballast level): ${verdict(w <= 1.5)} (worst ${x(w)})`);
  }
  for (const tier of ['cgroup', 'subreaper']) {
    const w = worst(storm.filter((v) => v.method === tier));
    if (w !== null) goals.push(`${tier} tier, a fork storm within 2x of the group kill of the same storm (settled and quiescent): ${verdict(w <= 2)} (${x(w)})`);
  }
  const cordonCells = sc.cells.filter((c) => c.method !== 'group kill');
  const late = cordonCells.reduce((n, c) => n + c.late, 0);
  const results = cordonCells.reduce((n, c) => n + c.results, 0);
  const zombies = sc.cells.reduce((n, c) => n + c.zombies, 0) + (sc.hostZombieChildren ?? 0);
  const left = sc.cells.reduce((n, c) => n + c.leftBehind, 0);
  goals.push(`every cordon result settled within grace (${sc.graceMs / 1000} s) + 100 ms: ${verdict(late === 0)} (${late} of ${results} late)`);
  const initZombies = sc.cells.reduce((n, c) => n + (c.initZombies ?? 0), 0);
  goals.push(
    `zero zombies (members and anchors unreaped 50 ms after a cell; the bench's zombie children at the end): ${verdict(zombies === 0)} (${zombies}; ` +
      `besides, ${initZombies} orphans not yet reaped by init)`,
  );
  goals.push(`processes left behind: ${left}`);
  lines.push('');
  lines.push('Goals of issue #13 in this run:');
  lines.push('');
  for (const g of goals) lines.push(`- ${g}`);
  return lines;
}

// ---------------------------------------------------------------- SVG chart

const COLORS = ['#1b7f3b', '#c0392b', '#d68910', '#2e86c1', '#7d3c98', '#566573'];

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * Two panels: processes left behind per library (all scenarios), and time to
 * quiescence per scenario and library on a log scale (a hatched full-height
 * bar = never quiescent within the bound).
 */
export function svg(run) {
  const libs = run.libraries.map((l) => l.name);
  const color = (name) => COLORS[libs.indexOf(name) % COLORS.length];
  const sums = summarize(run);
  const W = 960;
  const parts = [];
  const text = (x, y, s, attrs = '') => parts.push(`<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${esc(s)}</text>`);
  const rect = (x, y, w, h, fill, attrs = '') =>
    parts.push(`<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(0, w).toFixed(1)}" height="${Math.max(0, h).toFixed(1)}" fill="${fill}" ${attrs}/>`);

  // Panel 1: processes left behind, horizontal bars.
  let y = 30;
  text(20, y, 'Processes left behind, all scenarios (found by tag in /proc)', 'font-size="16" font-weight="bold"');
  y += 16;
  const maxLeft = Math.max(1, ...sums.map((s) => s.leftBehind));
  const barX = 200;
  const barW = W - barX - 160;
  for (const s of sums) {
    y += 26;
    text(barX - 10, y + 13, s.library, 'font-size="13" text-anchor="end"');
    const w = (s.leftBehind / maxLeft) * barW;
    rect(barX, y, s.leftBehind === 0 ? 2 : w, 18, color(s.library));
    text(barX + (s.leftBehind === 0 ? 2 : w) + 8, y + 13, `${s.leftBehind} (${s.scenariosLeaking} of ${s.scenarios} scenarios)`, 'font-size="12"');
  }

  // Panel 2: time to quiescence, grouped bars, log scale.
  y += 60;
  text(20, y, 'Time from t0 to quiescence (log scale; hatched = never, within the bound)', 'font-size="16" font-weight="bold"');
  y += 20;
  const top = y;
  const plotH = 260;
  const left = 70;
  const right = W - 20;
  const bound = run.options.bound;
  const lo = 1;
  const hi = bound;
  const scale = (ms) => {
    const v = Math.min(Math.max(ms, lo), hi);
    return (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo));
  };
  // Axis and grid.
  for (let v = 1; v <= hi; v *= 10) {
    const gy = top + plotH - scale(v) * plotH;
    parts.push(`<line x1="${left}" x2="${right}" y1="${gy.toFixed(1)}" y2="${gy.toFixed(1)}" stroke="#ddd"/>`);
    text(left - 6, gy + 4, v >= 1000 ? `${v / 1000} s` : `${v} ms`, 'font-size="11" text-anchor="end"');
  }
  parts.push(`<line x1="${left}" x2="${left}" y1="${top}" y2="${top + plotH}" stroke="#333"/>`);
  parts.push(`<line x1="${left}" x2="${right}" y1="${top + plotH}" y2="${top + plotH}" stroke="#333"/>`);
  const groupW = (right - left) / Math.max(1, run.scenarios.length);
  const bw = Math.min(18, (groupW - 10) / libs.length);
  run.scenarios.forEach((sc, i) => {
    const gx = left + i * groupW + (groupW - bw * libs.length) / 2;
    libs.forEach((name, j) => {
      const t = run.trials.find((x) => x.library === name && x.scenario === sc.id);
      if (!t) return;
      const x = gx + j * bw;
      if (t.quiescentMs === null || t.quiescentMs === undefined) {
        rect(x, top, bw - 2, plotH, 'url(#never)', `stroke="${color(name)}" stroke-width="1"`);
      } else {
        const h = scale(t.quiescentMs) * plotH;
        rect(x, top + plotH - h, bw - 2, h, color(name));
      }
    });
    const label = sc.title.length > 30 ? sc.title.slice(0, 29) + '…' : sc.title;
    const lx = left + i * groupW + groupW / 2;
    const ly = top + plotH + 14;
    parts.push(`<text x="${lx.toFixed(1)}" y="${ly.toFixed(1)}" font-size="11" text-anchor="end" transform="rotate(-30 ${lx.toFixed(1)} ${ly.toFixed(1)})">${esc(label)}</text>`);
  });
  y = top + plotH + 110;
  // Legend.
  let lx = left;
  for (const name of libs) {
    rect(lx, y - 11, 14, 14, color(name));
    text(lx + 20, y, name, 'font-size="12"');
    lx += 40 + name.length * 7.5;
  }
  rect(lx, y - 11, 14, 14, 'url(#never)', 'stroke="#333"');
  text(lx + 20, y, 'never quiescent', 'font-size="12"');
  y += 30;
  const m = run.machine;
  text(20, y, `${run.date} · ${m.cpus} CPUs ${m.model} · Linux ${m.kernel} · Node ${m.node}`, 'font-size="11" fill="#555"');
  const H = y + 20;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif">`,
    '<defs><pattern id="never" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">' +
      '<rect width="6" height="6" fill="#fbeaea"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c0392b" stroke-width="2"/></pattern></defs>',
    `<rect width="${W}" height="${H}" fill="white"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
