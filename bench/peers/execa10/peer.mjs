// execa 10 for a benchmark host older than Node 22 (execa 10 needs Node 22+):
// bench/lib/libraries.mjs starts this file under CI's Node 24 and drives it
// with one JSON object per line on stdin:
//   {"op":"start","id":1,"command":"sh","args":[...],"env":{...}}
//   {"op":"cancel","id":1}
// and reads one per line on stdout:
//   {"id":1,"ev":"out","text":"..."}      the subprocess's stdout
//   {"id":1,"ev":"pid","pid":123}
//   {"id":1,"ev":"settled","at":<epoch ms>,"ok":true,"value":{"code":0,"signal":null}}
// Times are epoch milliseconds (performance.timeOrigin + performance.now()),
// a clock both processes share. stdin's end ends the peer.
import { createInterface } from 'node:readline';
import { execa } from 'execa';

const subs = new Map();
const send = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const now = () => performance.timeOrigin + performance.now();

createInterface({ input: process.stdin }).on('line', (line) => {
  const msg = JSON.parse(line);
  if (msg.op === 'start') {
    const sub = execa(msg.command, msg.args, { env: msg.env, extendEnv: false, killDescendants: true });
    subs.set(msg.id, sub);
    send({ id: msg.id, ev: 'pid', pid: sub.pid });
    sub.stdout.setEncoding('utf8');
    sub.stdout.on('data', (text) => send({ id: msg.id, ev: 'out', text }));
    sub.stderr.resume();
    sub.then(
      (r) => send({ id: msg.id, ev: 'settled', at: now(), ok: true, value: { code: r.exitCode ?? null, signal: r.signal ?? null } }),
      (e) => send({ id: msg.id, ev: 'settled', at: now(), ok: false, error: { code: e.code, signal: e.signal, name: e.name } }),
    );
  } else if (msg.op === 'cancel') {
    subs.get(msg.id)?.kill();
  }
});
process.stdin.on('end', () => process.exit(0));
