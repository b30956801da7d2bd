// Formatting shared by the reports (bench/lib/report.mjs and the sections' own).

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return 'never';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 10_000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

/** The table of one measureOverhead() result: median, p95 and their ratios to child_process, per mode and library. */
export function overheadTable(o) {
  const lines = ['| mode | library | median | p95 | median ratio | p95 ratio |', '| --- | --- | --- | --- | --- | --- |'];
  for (const mode of ['sequential', 'concurrent']) {
    for (const row of o[mode]) {
      lines.push(
        `| ${mode === 'sequential' ? 'sequential' : `${o.concurrency}-way concurrent`} | ${row.library} | ${fmtMs(row.median)} | ${fmtMs(row.p95)} | ` +
          `${row.medianRatio.toFixed(2)}x | ${row.p95Ratio.toFixed(2)}x |`,
      );
    }
  }
  return lines;
}
