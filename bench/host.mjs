// A tiny host for the "host SIGKILLed" scenario:
//
//   node bench/host.mjs <library> <sh script>
//
// runs `sh -c <script>` with the library (as bench/lib/libraries.mjs does, or
// one of bench/lib/confine.mjs's approaches),
// prints `PID root <pid>` and READY once the tree printed READY, then idles
// until the benchmark SIGKILLs it. Nothing in this process can react to that.
import { approach } from './lib/confine.mjs';
import { library } from './lib/libraries.mjs';

const [name, script] = process.argv.slice(2);
if (!name || !script) {
  process.stderr.write('usage: node bench/host.mjs <library> <sh script>\n');
  process.exit(2);
}
const handle = (approach(name) ?? library(name)).start('sh', ['-c', script], process.env);
handle.completion.then(() => {});
const deadline = Date.now() + 10_000;
while (!/^READY$/m.test(handle.out.text)) {
  if (Date.now() > deadline) {
    process.stderr.write(`bench/host.mjs: the tree printed no READY within 10 s\n`);
    process.exit(1);
  }
  await new Promise((resolve) => setTimeout(resolve, 5));
}
process.stdout.write(`PID root ${handle.rootPid()}\nREADY\n`);
setInterval(() => {}, 1 << 30);
