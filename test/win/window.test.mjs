// The show state a command's windows start with (the `windowsHide` option, as
// child_process.spawn's): `true` gives the command STARTF_USESHOWWINDOW with
// SW_HIDE; the default (false) gives it no show state at all, so it shows
// its windows as it would by itself. The anchor itself always runs hidden
// (the host starts it with windowsHide): none of that reaches the command.
// startup-info.exe (fixtures/startup-info.cc) prints the STARTUPINFO it was
// given and whether its window is visible once shown as a GUI program does.
// What is asserted is the STARTUPINFO: Wine 8 (null display driver) shows a
// window on SW_SHOWDEFAULT whatever the STARTUPINFO says (measured: VISIBLE 1
// with SW_HIDE), so the window's visibility is printed, not asserted.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { spawn as spawnChild } from 'node:child_process';
import { onLines } from '../helpers/common.mjs';
import { cordon, nativeFixture, parsePids, track, within } from './helpers.mjs';

const { exe: startupInfo, skip: noStartupInfo } = nativeFixture('startup-info');
const STARTF_USESHOWWINDOW = 0x1;
const SW_HIDE = 0;

/** What startup-info.exe printed under `start(stdio)`, and its exit code (bounded). */
async function observe(t, start) {
  const proc = start(['ignore', 'pipe', 'ignore']);
  const seen = {};
  const exited = new Promise((resolve, reject) => {
    const r = proc.result ?? new Promise((res) => proc.on('exit', (code) => res({ exitCode: code })));
    r.then(resolve, reject);
  });
  onLines(proc.stdout, (line) => {
    Object.assign(seen, parsePids(line, t.add));
    const m = /^STARTUP (\d+) (\d+)$/.exec(line.trim());
    if (m) [seen.flags, seen.show] = [Number(m[1]), Number(m[2])];
    const v = /^VISIBLE ([01])$/.exec(line.trim());
    if (v) seen.visible = v[1] === '1';
  });
  const result = await within(exited, 30000, 'startup-info.exe to print its STARTUPINFO and exit', [seen.root].filter(Boolean));
  assert.equal(result.exitCode, 0, `startup-info.exe exit code (92: no window): ${JSON.stringify(seen)}`);
  assert.equal(typeof seen.flags, 'number', 'it printed its STARTUPINFO');
  return seen;
}

// proves nothing of the contract: the windowsHide option
test('windowsHide: true starts the command hidden (STARTF_USESHOWWINDOW, SW_HIDE), as child_process does', { skip: noStartupInfo }, async (ctx) => {
  const t = track(ctx);
  const seen = await observe(t, (stdio) => t.proc(cordon.spawn(startupInfo, [], { stdio, windowsHide: true })));
  ctx.diagnostic(`cordon, windowsHide: true: ${JSON.stringify(seen)}`);
  assert.equal(seen.flags & STARTF_USESHOWWINDOW, STARTF_USESHOWWINDOW, 'STARTF_USESHOWWINDOW set');
  assert.equal(seen.show, SW_HIDE, 'wShowWindow is SW_HIDE');
  // The same program under child_process with windowsHide: what the option means there.
  const node = await observe(t, (stdio) => spawnChild(startupInfo, [], { stdio, windowsHide: true }));
  ctx.diagnostic(`child_process, windowsHide: true: ${JSON.stringify(node)}`);
  assert.equal(node.flags & STARTF_USESHOWWINDOW, STARTF_USESHOWWINDOW);
  assert.equal(node.show, SW_HIDE);
});

// proves nothing of the contract: the windowsHide option
test('by default (windowsHide: false) the command gets no show state from the anchor, which runs hidden', { skip: noStartupInfo }, async (ctx) => {
  const t = track(ctx);
  for (const options of [{}, { windowsHide: false }]) {
    const seen = await observe(t, (stdio) => t.proc(cordon.spawn(startupInfo, [], { stdio, ...options })));
    ctx.diagnostic(`cordon, ${JSON.stringify(options)}: ${JSON.stringify(seen)}`);
    assert.equal(seen.flags & STARTF_USESHOWWINDOW, 0, `no STARTF_USESHOWWINDOW (${JSON.stringify(options)})`);
  }
});

// proves nothing of the contract: the windowsHide option's input error
test('windowsHide that is not a boolean is refused before anything runs (ERR_INVALID_ARG_TYPE)', async (ctx) => {
  track(ctx);
  assert.throws(() => cordon.spawn(process.execPath, ['-e', ''], { windowsHide: 1 }), (e) => cordon.isCordonError(e) && e.code === 'ERR_INVALID_ARG_TYPE' && e.stage === 'input');
});
