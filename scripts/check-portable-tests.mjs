#!/usr/bin/env node
// Keeps the suite runnable on macOS (docs/macos-suite.md): a test file or
// fixture may not reach for what only Linux has (/proc, util-linux's runuser)
// unless it is listed below with its reason. Processes are observed through
// test/helpers/observer.ts (/proc or ps), util-linux's setsid comes from the
// suite's own shim off Linux (test/helpers/setsid-shim.ts, wired in
// vitest.config.ts), so a new direct use is a regression for the macOS suite.
//
//   node scripts/check-portable-tests.mjs      exit 1 and the offending lines, if any
//
// The rule, line by line (whole-line comments are skipped): `/proc/` (or the
// path '/proc' in quotes), `runuser`, `script -qc`, `flock`, `ss` (run as a
// program) and `stat -c` are allowed only in test/helpers/
// (the observer and the helpers, reviewed in docs/macos-suite.md) and in the
// files listed here: LINUX_ONLY, whose uses need Linux (or its tools) and sit
// behind a guard that skips them elsewhere with the reason in the title; and
// REMAINING, not yet made portable (the table in docs/macos-suite.md says what
// is left). A listed file that no longer uses either is an error too: the
// list only shrinks. test/win (Windows) and test/xnu-model (the model of
// XNU, which runs on Linux by design) are not scanned.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Files whose Linux-only uses prove Linux-only behaviour, each skipped elsewhere with this reason in its title. */
export const LINUX_ONLY = {
  'test/anchor-death.test.ts': "the tree's cgroup (/proc/self/cgroup): cgroups are Linux-only",
  'test/cgroup-names.test.ts': 'the cgroup tier (cgroup directories, /proc/sys/kernel/ns_last_pid, /proc/self/cgroup)',
  'test/cgroup-scale.test.ts': "the cgroup tier's cost (/proc/self/stat cutime and cstime)",
  'test/cgroup-v2-leaf.test.ts': 'cgroup v2 delegation (/proc/self/cgroup)',
  'test/limits.test.ts': 'resource limits are cgroup limits (/proc/<pid>/cgroup, /proc/self/mountinfo)',
  'test/threat-model.test.ts': "the cgroup namespace (/proc/<pid>/ns/cgroup, /proc/self/mountinfo)",
  'test/hung-mount.test.ts': "a FUSE mount whose stat() hangs, reached through /proc/<pid>/fd (needs /dev/fuse)",
  'test/scale.test.ts': "the anchor's system calls and CPU ticks (/proc/<pid>/io, /proc/<pid>/stat) and a thread's children (/proc/<pid>/task)",
  'test/host-death.test.ts': "which process holds the channel's socket (/proc/<pid>/fd links, ss)",
  'test/wait-delay.test.ts': "which process holds a pipe's other end (/proc/<pid>/fd links, ss)",
  'test/escapees.test.ts': "a threaded escapee: only on Linux do threads have pids a walk can probe (/proc/<pid>/task)",
  'test/warm.test.ts': "warm anchors are Linux-only (cgroup and subreaper tiers): a waiting anchor's /proc/<pid>/cwd and start time",
  'test/fixtures/host.mjs': "--leak-channel finds its sockets by /proc/self/fd links: only host-death's ss test asks for it, and the fixture refuses it off Linux",
  'test/stdio.test.ts': "what a descriptor is linked to (/proc/<pid>/fd) and its flags (/proc/<pid>/fdinfo): those tests skip off Linux; the signal test is portable",
  'test/control-channel.test.ts': "descriptor links (/proc/<pid>/fd: which socket a descriptor is) and socket buffers (/proc/sys/net/core, ss): skipped off Linux and under ps",
  'test/leftovers.test.ts': "one test runs util-linux's script -qc and flock and coreutils' timeout, which macOS does not ship",
  'test/observer.test.ts': "the observers' own test: /proc against ps, where /proc exists",
  'test/execa-habits.test.ts': "two tests check which file a descriptor is (/proc/<pid>/fd links): they skip off Linux",
  'test/thread-ids.test.ts': "thread ids share the pid space only on Linux (/proc/<pid>/task): the whole file skips elsewhere",
  'test/process-group-escapes.test.ts': "its pid-reuse tests: Linux reuses a pid whose /proc entry the sweep skipped (macOS skips by unique id); runuser where present; the rest is portable",
  'test/other-users.test.ts': "acting as another user through util-linux's runuser (skipped where missing('runuser'))",
};

/** Files not yet portable: what remains is in docs/macos-suite.md. */
export const REMAINING = {};

// /proc; util-linux's runuser, script -qc and flock; iproute2's ss; GNU stat -c.
const PATTERN = /\/proc\/|['"`]\/proc['"`]|\brunuser\b|\bscript -qc\b|\bflock \S|['"`]ss['"`]|\bstat -c\b/;
const COMMENT = /^\s*(\/\/|\*|\/\*|#)/;

/** The files scanned: test/*.test.ts and test/fixtures/*. */
export function scannedFiles(root = ROOT) {
  const tests = readdirSync(join(root, 'test')).filter((f) => f.endsWith('.test.ts')).map((f) => `test/${f}`);
  const fixtures = readdirSync(join(root, 'test/fixtures'), { withFileTypes: true }).filter((d) => d.isFile()).map((d) => `test/fixtures/${d.name}`);
  return [...tests, ...fixtures].sort();
}

/** Lines that use what only Linux has, by file: { file: [[line, text], ...] }. */
export function linuxUses(root = ROOT) {
  const out = {};
  for (const file of scannedFiles(root)) {
    const hits = readFileSync(join(root, file), 'utf8')
      .split('\n')
      .map((text, i) => [i + 1, text])
      .filter(([, text]) => !COMMENT.test(text) && PATTERN.test(text));
    if (hits.length > 0) out[file] = hits;
  }
  return out;
}

/** What breaks the rule: unlisted uses, stale entries, a setsid shim no longer wired. */
export function check(root = ROOT) {
  const problems = [];
  const uses = linuxUses(root);
  const listed = { ...LINUX_ONLY, ...REMAINING };
  for (const [file, hits] of Object.entries(uses)) {
    if (file in listed) continue;
    for (const [line, text] of hits) problems.push(`${file}:${line}: uses what only Linux has (/proc, runuser, script -qc, flock, ss, stat -c): read through test/helpers/observer.ts, or list the file in scripts/check-portable-tests.mjs with its reason: ${text.trim().slice(0, 160)}`);
  }
  for (const file of Object.keys(listed)) if (!(file in uses)) problems.push(`${file}: listed in scripts/check-portable-tests.mjs but uses nothing Linux-only any more: drop it from the list (and update docs/macos-suite.md)`);
  // A Linux-only file has a guard at all: a platform check or a skip with its reason.
  for (const file of Object.keys(LINUX_ONLY)) {
    if (!(file in uses)) continue;
    const text = readFileSync(join(root, file), 'utf8');
    if (!/process\.platform|itWhere\(|onlyWhere\(|\.skipIf\(/.test(text)) problems.push(`${file}: listed as Linux-only but has no guard (onlyWhere(process.platform === 'linux', reason), itWhere or skipIf)`);
  }
  const config = readFileSync(join(root, 'vitest.config.ts'), 'utf8');
  if (!/wantSetsidShim\(\)/.test(config)) problems.push('vitest.config.ts no longer puts the setsid shim on the PATH off Linux (test/helpers/setsid-shim.ts)');
  const doc = readFileSync(join(root, 'docs/macos-suite.md'), 'utf8');
  for (const file of Object.keys(listed)) if (!doc.includes(file)) problems.push(`${file}: listed here but not in docs/macos-suite.md's table`);
  return problems;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const problems = check();
  for (const p of problems) console.error(p);
  console.log(`check-portable-tests: ${scannedFiles().length} files scanned; ${Object.keys(LINUX_ONLY).length} Linux-only with a reason, ${Object.keys(REMAINING).length} not yet portable; ${problems.length} problem(s)`);
  process.exit(problems.length > 0 ? 1 : 0);
}
