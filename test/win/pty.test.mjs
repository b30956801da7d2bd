// CONTRACT C13: on Windows a terminal (pty) is a pseudo console (ConPTY) the anchor
// creates before the command exists (native/win/pty.h). Where this Windows
// has no usable one (before 10 1809; Wine) it is refused before anything
// runs, and capabilities() says so.
//
// Measured under Wine 8 (this lane's; a probe of CreatePseudoConsole written
// for it): kernel32 has all three functions; CreatePseudoConsole succeeds and
// starts conhost.exe as the caller's child; a process created with
// PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE is attached to it (what it writes to
// CONOUT$ comes out of the output pipe as VT sequences), but Wine gives it no
// standard handles on it (with STARTF_USESTDHANDLES and none given they are
// NULL; without, they are the caller's own, so its output bypasses the
// console); ResizePseudoConsole answers E_NOTIMPL. A program's ordinary output
// never reaches the terminal there, so Wine gets no terminal, and the tests
// that need one run only on Windows itself (the GitHub windows job, which sets
// CORDON_WIN_REQUIRE_TERMINAL=1 so that a missing terminal fails there
// instead of skipping).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cordon, track, underWine, within } from './helpers.mjs';

const terminal = cordon.capabilities().guarantees.terminal;
const noTerminal = underWine
  ? "Wine 8's pseudo console gives the command no standard handles (measured: see this file's head), so the terminal is refused under Wine; these run on Windows itself (the GitHub windows job)"
  : 'this Windows has no ConPTY (capabilities().guarantees.terminal is false)';
const skip = terminal || process.env.CORDON_WIN_REQUIRE_TERMINAL === '1' ? false : noTerminal;

// The terminal's output with its VT sequences taken out (what a screen shows, roughly).
const plain = (s) => s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]/g, '');

function collect(proc) {
  let out = '';
  proc.stdout.setEncoding('utf8');
  proc.stdout.on('data', (d) => (out += d));
  return { text: () => plain(out) };
}

async function until(pred, ms, what) {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// proves C13 (own report), C11 (own report)
test('pty where there is no usable pseudo console: refused before anything runs (ERR_CORDON_UNSUPPORTED), and capabilities() says why', { skip: terminal ? 'this Windows has a terminal (the tests below)' : false }, () => {
  assert.equal(cordon.capabilities().guarantees.terminal, false);
  assert.ok(cordon.capabilities().notes.some((n) => /pty is refused/.test(n)), 'a note says why there is no terminal');
  assert.throws(() => cordon.spawn(process.execPath, ['-e', '0'], { pty: true }), (e) => e.code === 'ERR_CORDON_UNSUPPORTED' && /"pty"/.test(e.message));
});

// proves C13 (own report)
test('pty with a lease: refused on Windows before anything runs (a leased tree gets no terminal there)', () => {
  // (Where there is no terminal at all, that refusal comes first.)
  const why = terminal ? /lease/ : /"pty"/;
  assert.throws(() => cordon.spawn(process.execPath, ['-e', '0'], { pty: true, lease: 60000 }), (e) => e.code === 'ERR_CORDON_UNSUPPORTED' && why.test(e.message));
});

// proves C13: the command's own output and input through the console; its leftovers as cordon reports them
test("pty: the command's output comes through the terminal, its input is what the host writes, the last output arrives, and the console host is no leftover", { skip }, async (ctx) => {
  const t = track(ctx);
  const script = [
    "process.stdout.write('READY ' + process.stdout.isTTY + ' ' + process.stdin.isTTY + '\\n');",
    "require('readline').createInterface({ input: process.stdin }).once('line', (l) => {",
    "  let s = 'GOT ' + l + '\\n'; for (let i = 0; i < 300; i++) s += 'LAST ' + i + '\\n';",
    '  process.stdout.write(s, () => process.exit(0));',
    '});',
  ].join('\n');
  const proc = t.proc(cordon.spawn(process.execPath, ['-e', script], { pty: true }));
  assert.equal(proc.stderr, null);
  const out = collect(proc);
  await within(proc.started, 15000, 'started');
  await within(until(() => /READY/.test(out.text()), 20000, 'READY'), 25000, 'READY');
  assert.match(out.text(), /READY true true/, 'stdin and stdout are the console (a TTY to Node)');
  proc.stdin.write('hello\r');
  const result = await within(proc.result, 30000, 'result');
  assert.equal(result.exitCode, 0);
  assert.match(out.text(), /GOT hello/);
  assert.match(out.text(), /LAST 299/, 'the last output arrived before the result');
  assert.deepEqual(result.leftovers, [], 'the console host is not a member');
  assert.equal(result.waitDelayExceeded, false);
});

// proves C13: the size the command itself prints
test('pty: resize() reaches the console (the command sees the new size); Ctrl-C is the byte 0x03', { skip }, async (ctx) => {
  const t = track(ctx);
  const script = [
    "const size = () => process.stdout.write('SIZE ' + process.stdout.columns + 'x' + process.stdout.rows + '\\n');",
    "process.stdout.on('resize', size);",
    'size();',
    'setInterval(() => {}, 1000);',
  ].join('\n');
  const proc = t.proc(cordon.spawn(process.execPath, ['-e', script], { pty: { cols: 90, rows: 30 } }));
  const out = collect(proc);
  await within(until(() => /SIZE 90x30/.test(out.text()), 20000, 'SIZE 90x30'), 25000, 'the first size');
  proc.resize(120, 40);
  await within(until(() => /SIZE 120x40/.test(out.text()), 15000, 'SIZE 120x40'), 20000, 'the new size');
  proc.stdin.write('\x03');
  const result = await within(proc.result, 20000, 'the result after Ctrl-C');
  assert.notEqual(result.exitCode, 0, `Ctrl-C ended the command (${JSON.stringify({ exitCode: result.exitCode, signal: result.signal })})`);
  assert.deepEqual(result.leftovers, []);
});

// proves C3 (own report), C13 (own report)
test('pty: terminate() ends a tree on a terminal, its console host with it', { skip }, async (ctx) => {
  const t = track(ctx);
  const proc = t.proc(cordon.spawn(process.execPath, ['-e', "process.stdout.write('READY\\n'); setInterval(() => {}, 1000)"], { pty: true }));
  const out = collect(proc);
  await within(until(() => /READY/.test(out.text()), 20000, 'READY'), 25000, 'READY');
  await within(proc.terminate({ grace: 2000 }), 20000, 'terminate()');
  const result = await within(proc.result, 10000, 'result');
  assert.deepEqual(result.leftovers, []);
});
