// The markdown of the pty section (run.pty, from bench/lib/pty.mjs's measurePty).

const ms = (v) => (v === null || v === undefined || Number.isNaN(v) ? '–' : v < 10 ? `${v.toFixed(1)} ms` : `${Math.round(v)} ms`);
const ratio = (a, b) => (a > 0 && b > 0 ? `${(a / b).toFixed(2)}x` : '–');
const cellText = (s) => String(s).replace(/\|/g, '\\|').slice(0, 300);
const errs = (o) => (o?.errors?.length ? ` (${o.errors.length} errors; first: ${cellText(o.errors[0])})` : '');

export function ptyMarkdown(p) {
  const has = p.libraries.some((l) => l.name === 'node-pty');
  const L = (lib) => p.latency[lib] ?? {};
  const T = (lib) => p.throughput[lib] ?? {};
  const E = (lib) => p.escapes[lib] ?? {};
  const lines = ['', '## A contained terminal beside node-pty', ''];
  lines.push(
    `cordon \`spawn(..., { pty })\` and node-pty \`pty.spawn()\` on an 80x24 terminal (TERM=xterm-256color), alternating in one run` +
      (has ? ` (node-pty ${p.nodePty.version})` : `; node-pty: skipped: ${p.nodePty.skipped}`) +
      '; both read the output decoded as UTF-8. ' +
      `**Start to prompt**: \`bash --norc --noprofile -i\` with PS1 a marker, from the spawn call until the marker is in the output, ` +
      `${p.runs} runs each after one first run each that is not counted (its time is the row below); the tree is then ended, untimed (cordon \`kill()\`, node-pty \`kill()\`, i.e. SIGHUP to bash; a tree ` +
      `still there 2 s later is counted, then SIGKILLed by pid). **Throughput**: \`cat\` of a ${p.sizeMiB} MiB ASCII file, from the ` +
      `spawn call until the root exited and the output ended (cordon: \`exit\` and stdout's end; node-pty: \`onExit\`, which follows ` +
      `the end of its output), MB/s of the file's bytes, median of ${p.catRuns}; a run is short when fewer bytes came by the end ` +
      `than cat wrote plus the CR the terminal puts before each LF (ONLCR; 100 ms after the settlement no more had come either). **Left behind**: bash -i runs ` +
      `\`${p.escapeJobs}\`; at its next prompt, the library's stop (cordon \`terminate({ grace: 1000 })\`, resolved at quiescence; ` +
      `node-pty \`kill()\`, awaiting \`onExit\`); tagged processes alive 1 s after the stop returned, then SIGKILLed by pid. ` +
      'Ratios: cordon / node-pty (above 1: cordon slower to the prompt, faster through the terminal).',
  );
  lines.push('');
  lines.push(has ? '| measure | cordon | node-pty | cordon / node-pty |' : '| measure | cordon |');
  lines.push(has ? '| --- | --- | --- | --- |' : '| --- | --- |');
  const row = (name, f, r) => lines.push(`| ${name} | ${f('cordon')} |${has ? ` ${f('node-pty')} | ${r} |` : ''}`);
  row('start to prompt, median', (l) => ms(L(l).median) + errs(L(l)), ratio(L('cordon').median, L('node-pty').median));
  row('start to prompt, p95', (l) => ms(L(l).p95), ratio(L('cordon').p95, L('node-pty').p95));
  row('first run, not counted above', (l) => ms(L(l).first), ratio(L('cordon').first, L('node-pty').first));
  row('trees the stop at the first prompt did not end within 2 s', (l) => {
    const x = L(l);
    if (x.runs === undefined) return '–';
    return `${x.notEnded} of ${x.runs}${x.notEnded ? ` (${[...new Set(x.notEndedCommands)].join(', ')} still running)` : ''}`;
  }, '');
  row('throughput, median', (l) => {
    const t = T(l);
    let short = t.short?.length ? `; **${t.short.length} of ${t.runs} runs short** of the output (by ${t.short.join(', ')} bytes)` : '';
    if (t.late) short += `; ${t.late} bytes after the end`;
    return `${t.medianMBps?.toFixed(0) ?? '–'} MB/s (${ms(t.medianMs)})${short}${errs(t)}`;
  }, ratio(T('cordon').medianMBps, T('node-pty').medianMBps));
  row('left behind 1 s after the stop', (l) => {
    const e = E(l);
    if (e.left === undefined) return `–${errs(e)}`;
    const sleeps = e.beforeCommands.filter((c) => c === 'sleep 1000').length;
    const stop = e.stopError ? `the stop failed: ${cellText(e.stopError)}` : `the stop returned in ${ms(e.stopMs)}`;
    return `**${e.left}**${e.left ? ` (${e.leftCommands.join(', ')})` : ''}; before it ${e.before} tagged, ${sleeps} of them \`sleep 1000\`; ${stop}`;
  }, '');
  lines.push('');
  lines.push(
    'A surviving `sleep 1000` is named by the escape it came from ([job], [setsid], [double fork], [nohup]), told by its ' +
      "session, process group and ignored SIGHUP. cordon's tagged count before the stop includes its anchor process (the terminal's relay). cordon's `terminate()` asks as a closing " +
      "terminal does, with SIGHUP (bash -i ignores SIGTERM); the `nohup` sleep ignores SIGHUP, so the stop takes the grace before its SIGKILL.",
  );
  return lines;
}
