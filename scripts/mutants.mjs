#!/usr/bin/env node
// Mutation testing of the suite (#47): does it notice when a core behaviour
// breaks? Each mutant below is one small change to the product (a file, a
// text found there exactly once, its replacement; `also`: more such edits
// made together with it, for a behaviour that two checks guard) and the test
// files and project the contract names for it. One at a time, in a scratch copy of
// this checkout's HEAD (never the working tree), the mutant is applied, the
// native code rebuilt where a native file changed (node-gyp build: only the
// changed file is recompiled, build/ having been copied with its times) and
// the TypeScript where a lib/ file changed, the named tests run, and the
// file restored. A mutant is caught when its tests fail, survived when they
// pass; a mutant whose text is no longer in its file is "stale" (fix the
// list), one that does not build is "no build". The table printed (markdown)
// goes into docs/mutants.md.
//
//   node scripts/mutants.mjs                 every mutant, in order
//   node scripts/mutants.mjs --only a,b      those ids
//   node scripts/mutants.mjs --list          the list, nothing run
//   node scripts/mutants.mjs --baseline      also run each mutant's tests unmutated first
//   node scripts/mutants.mjs --keep          leave the scratch copy (its path is printed)
//
// Sequential and slow (a native rebuild and a vitest run per mutant): on a
// 2-core machine run nothing else heavy meanwhile. A failing test of a
// mutant's run may be a flake rather than the mutant: the table lists the
// first failing tests, and --baseline shows whether they pass unmutated.
import { execFileSync } from 'node:child_process';
import { runInGroup } from './lib/run-group.mjs';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The mutants. `tests`: the test files to run (the one or two the contract
 * names first for the behaviour); `project`: the vitest project (a tier);
 * `model`: run on the model of XNU (.ci/darwin-model.sh, which builds the
 * copy's darwin sources itself), not on Linux.
 */
export const MUTANTS = [
  {
    id: 'wait-delay-x4',
    what: 'C4: the wait delay applied 4x too long (the drain deadline)',
    file: 'lib/output.ts',
    search: '    }, this.hooks.waitDelay);',
    replace: '    }, this.hooks.waitDelay * 4);',
    tests: ['test/wait-delay.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'grace-x2',
    what: "C3: the forced kill at 2x the grace (the anchor's deadline)",
    file: 'native/protocol.cc',
    search: 'int64_t deadline = now + (grace_ms < 0 ? 0 : grace_ms);',
    replace: 'int64_t deadline = now + (grace_ms < 0 ? 0 : 2 * grace_ms);',
    tests: ['test/grace.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'wait-delay-x1.5',
    what: 'C4: the wait delay applied 50% too long',
    file: 'lib/output.ts',
    search: '    }, this.hooks.waitDelay);',
    replace: '    }, this.hooks.waitDelay * 1.5);',
    tests: ['test/wait-delay.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'grace-x1.5',
    what: 'C3: the forced kill at 1.5x the grace',
    file: 'native/protocol.cc',
    search: 'int64_t deadline = now + (grace_ms < 0 ? 0 : grace_ms);',
    replace: 'int64_t deadline = now + (grace_ms < 0 ? 0 : grace_ms + grace_ms / 2);',
    tests: ['test/grace.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'pg-freeze-sigkill',
    what: "process-group tier: the forced stop's freeze sends SIGKILL instead of SIGSTOP",
    file: 'native/posix/tier_process_group.cc',
    search: 'int rc = cordon::signal_member(getpid(), group_, m, SIGSTOP, host_.pidfd());',
    replace: 'int rc = cordon::signal_member(getpid(), group_, m, SIGKILL, host_.pidfd());',
    tests: ['test/process-group-escapes.test.ts', 'test/coverage.test.ts'],
    project: 'process-group',
  },
  {
    id: 'pg-freeze-removed',
    what: "process-group tier: the forced stop's freeze walk removed (said done)",
    file: 'native/posix/tier_process_group.cc',
    search: 'frozen_ = freeze_outside(now_ms() + kFreezeMs);',
    replace: 'frozen_ = true;',
    tests: ['test/process-group-escapes.test.ts', 'test/coverage.test.ts'],
    project: 'process-group',
  },
  {
    id: 'subreaper-freeze-sigkill',
    what: "subreaper tier: the forced stop's freeze sends SIGKILL instead of SIGSTOP (the kill chases the tree)",
    file: 'native/posix/tier_subreaper.cc',
    search: 'int rc = cordon::signal_member(getpid(), group(), m, SIGSTOP, host_.pidfd());',
    replace: 'int rc = cordon::signal_member(getpid(), group(), m, SIGKILL, host_.pidfd());',
    tests: ['test/process-group-escapes.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'subreaper-freeze-one-walk',
    what: "subreaper tier: the forced stop's freeze ends after one walk (what was forked meanwhile is not stopped first)",
    file: 'native/posix/tier_subreaper.cc',
    search: 'calm = !found && walk_settled;',
    replace: 'calm = true;',
    tests: ['test/process-group-escapes.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'pg-quiet-one-walk',
    what: 'process-group tier: quiescence from one empty walk, even once members were found outside the group',
    file: 'native/posix/tier_process_group.cc',
    search: 'walks < (found_outside_ ? kQuietWalks : 1); walks++)',
    replace: 'walks < 1; walks++)',
    tests: ['test/process-group-escapes.test.ts', 'test/coverage.test.ts'],
    project: 'process-group',
    guarded: { by: 'pg-quiet-one-snapshot-walk', why: 'on Linux a walk is complete: after reading /proc it probes every pid the kernel handed out while it ran (ns_last_pid, native/linux/descendants.cc), so one walk that finds nothing is already proof; the three walks guard the listing where no such cursor exists' },
  },
  {
    id: 'pg-quiet-one-unsettled-walk',
    what: "process-group tier: quiescence from one walk that found nothing, settled or not (a process it listed gone when read may have forked a member it missed)",
    file: 'native/posix/tier_process_group.cc',
    search: 'settled = swept_settled_;\n    }\n    trace("quiescence',
    replace: 'settled = true;\n      walks = kQuietWalks;\n    }\n    trace("quiescence',
    tests: ['test/process-group-escapes.test.ts', 'test/coverage.test.ts'],
    project: 'process-group',
    guarded: { by: 'pg-quiet-one-snapshot-walk', why: 'on Linux a walk is settled whenever it ran to its end (visit_sweepable_processes sets it so: the probes of the pids handed out since stand for the darwin check), so this edit changes nothing there' },
  },
  {
    id: 'pg-quiet-one-snapshot-walk',
    what: "process-group tier: quiescence from one walk that is a snapshot (the directory read once, no pid handed out since probed), as walks were when #47 was filed",
    file: 'native/posix/tier_process_group.cc',
    search: 'walks < (found_outside_ ? kQuietWalks : 1); walks++)',
    replace: 'walks < 1; walks++)',
    also: [
      {
        file: 'native/linux/descendants.cc',
        search: 'i < kFirstProbes && pid > 0; i++, pid--) consider(pid, 0);',
        replace: 'i < 0 && pid > 0; i++, pid--) consider(pid, 0);',
      },
      {
        file: 'native/linux/descendants.cc',
        search: 'for (int chase = 0; go_on && chase < 8; chase++) {',
        replace: 'for (int chase = 0; go_on && chase < 0; chase++) {',
      },
    ],
    tests: ['test/process-group-escapes.test.ts', 'test/coverage.test.ts'],
    project: 'process-group',
  },
  {
    id: 'pg-session-ignored',
    what: "process-group tier: membership of the tree's session ignored (a member that left the group, not the session, with a scrubbed environment; the terminal's session)",
    file: 'native/posix/tier_process_group.cc',
    search: '    if (session_ <= 0 || m.pid == getpid()) return false;',
    replace: '    if (session_ <= 0 || m.pid == getpid() || true) return false;',
    tests: ['test/escapees.test.ts', 'test/pty.test.ts'],
    project: 'process-group',
  },
  {
    id: 'host-death-ignored',
    what: "C8: the anchor does not end the tree when its host's channel closes (host death)",
    file: 'native/posix/anchor.cc',
    search: '    trace("control channel closed: terminating tree");\n    host_gone_ = true;\n    control_open_ = false;\n    start_terminate(opts_.grace_ms);',
    replace: '    trace("control channel closed: terminating tree");\n    host_gone_ = true;\n    control_open_ = false;',
    tests: ['test/host-death.test.ts'],
    project: 'process-group',
  },
  {
    id: 'pg-root-exit-sweep-removed',
    what: "process-group tier: the root-exit sweep for setsid'd daemons outside the group removed",
    file: 'native/posix/tier_process_group.cc',
    search: '      found = sweep([](Member& m) { m.command = cordon::command_line(m.pid); });',
    replace: '      (void)0;',
    tests: ['test/escapees.test.ts', 'test/leftovers.test.ts'],
    project: 'process-group',
  },
  {
    id: 'leftovers-ignored',
    what: "C5: the leftovers policy ignored ('keep' and 'kill-on-failure' kill as 'kill' does)",
    file: 'lib/settlement.ts',
    search: "const kill = policy === 'kill' || (policy === 'kill-on-failure' && rootFailed(facts.rootExit!, this.cancelReason !== undefined, output.waitDelayExceeded));",
    replace: "const kill = policy !== undefined || rootFailed(facts.rootExit!, this.cancelReason !== undefined, output.waitDelayExceeded);",
    tests: ['test/leftovers.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'pids-max-not-written',
    what: 'cgroup limits: pids.max never written (limits.processes)',
    file: 'native/posix/cgroup_limits.cc',
    search: 'if (rc == 0 && spec.processes > 0) rc = write_small(pids_.dir + "/pids.max"',
    replace: 'if (rc == 0 && spec.processes < 0) rc = write_small(pids_.dir + "/pids.max"',
    tests: ['test/limits.test.ts'],
    project: 'cgroup',
  },
  {
    id: 'recycled-pid-unchecked',
    what: "Linux: signalling a member does not check its start time (a recycled pid is signalled)",
    file: 'native/linux/pinned_signal.cc',
    search: '  if (st.start != member.start_time) return false;  // recycled pid',
    replace: '  if (st.start != member.start_time && false) return false;  // recycled pid',
    tests: ['test/pid-reuse.test.ts'],
    project: 'subreaper',
    guarded: { by: 'recycled-pid-unchecked-both-pg', why: "in the subreaper tier a round signals only what its own walk listed as the anchor's descendant and verified by parentage (is_member) just before; a recycled pid could meet the removed check only in the microseconds between that verification and the signal, which no test can arrange from outside; the case the contract names (a freed root's pid reused) is proven in every tier by pid-reuse.test.ts" },
  },
  {
    id: 'recycled-pid-unchecked-both-pg',
    what: "Linux, process-group tier: neither check of a known member's start time (the snapshot's liveness check and the signal's), so a leftover's recycled pid is signalled",
    file: 'native/linux/pinned_signal.cc',
    search: '  if (st.start != member.start_time) return false;  // recycled pid',
    replace: '  if (st.start != member.start_time && false) return false;  // recycled pid',
    also: [
      {
        file: 'native/posix/known_members.cc',
        search: '    if (!cordon::same_process_alive(it->second.pid, it->second.start_time)) {',
        replace: '    if (false && !cordon::same_process_alive(it->second.pid, it->second.start_time)) {',
      },
    ],
    tests: ['test/pid-reuse.test.ts'],
    project: 'process-group',
  },
  {
    id: 'recycled-pid-unchecked-pg',
    what: "Linux, process-group tier: signalling a member does not check its start time (a leftover's recycled pid is signalled; the leftover reaped by a subreaper above the host)",
    file: 'native/linux/pinned_signal.cc',
    search: '  if (st.start != member.start_time) return false;  // recycled pid',
    replace: '  if (st.start != member.start_time && false) return false;  // recycled pid',
    tests: ['test/pid-reuse.test.ts'],
    project: 'process-group',
    guarded: { by: 'recycled-pid-unchecked-both-pg', why: "KnownMembers::alive() drops a member that is no longer the same process (start time) before any signal, so the signal's own check is the second of two" },
  },
  {
    id: 'lease-length-ignored',
    what: "leases: the lease's length ignored after the host is gone (the tree ends 100 ms later)",
    file: 'native/posix/anchor.cc',
    search: '      lease_deadline_ = now_ms() + opts_.lease_ms;\n      trace("control channel closed: lease of %d ms starts", opts_.lease_ms);',
    replace: '      lease_deadline_ = now_ms() + 100;\n      trace("control channel closed: lease of %d ms starts", opts_.lease_ms);',
    tests: ['test/lease.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'options-inherited',
    what: 'options read through the prototype chain: a property set on Object.prototype (prototype pollution) becomes an option',
    file: 'lib/options.ts',
    search: '  const o = Object.assign(Object.create(null) as Record<string, unknown>, options);',
    replace: '  const o = options as Record<string, unknown>;',
    tests: ['test/child-process-compat.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'stuck-state-dropped',
    what: "STUCK without the members' states: a process in uninterruptible sleep is not told apart",
    file: 'native/protocol.cc',
    search: "    arg(line, std::to_string(static_cast<long long>(m.pid)) + ':' + state);",
    replace: "    arg(line, std::to_string(static_cast<long long>(m.pid)) + ':' + '?');",
    tests: ['test/hung-mount.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'new-session-ignored',
    what: 'newSession (the drop-in\'s detached: true): the root stays in the host\'s process group',
    file: 'native/posix/command_child.cc',
    search: '  if (c.new_session && c.tier->group() == 0 && setsid() < 0) fail(c.status_fd, kStageTier, errno);',
    replace: '  (void)c.new_session;',
    tests: ['test/child-process-compat.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'warm-pin-holds-channel',
    what: "process-group tier, warm anchors: the pin keeps the anchor's descriptors (the control channel stays open when a waiting anchor is killed)",
    file: 'native/posix/tier_process_group.cc',
    search: '      cordon::close_fds_from(0, life[0]);',
    replace: '      (void)0;',
    tests: ['test/warm.test.ts'],
    project: 'process-group',
  },
  {
    id: 'warm-pin-outlives-anchor',
    what: 'process-group tier: the pin does not end with its anchor (a warm anchor SIGKILLed while it waits leaves its pin for ever)',
    file: 'native/posix/tier_process_group.cc',
    search: '      while (read(life[0], &b, 1) < 0 && errno == EINTR) {\n      }',
    replace: '      (void)b;\n      for (;;) pause();',
    tests: ['test/warm.test.ts'],
    project: 'process-group',
  },
  // On the model of XNU (.ci/darwin-model.sh; `model: true`): the darwin
  // build's own paths, which the Linux tiers cannot show.
  {
    id: 'darwin-warm-credentials-unchecked',
    what: "darwin: a warm anchor does not check its host's credentials (kern.proc.pid): a host that dropped to nobody could run a command as root through it",
    file: 'native/posix/warm.cc',
    search: '  std::string mine = credential_line(getpid());',
    replace: '  if (host > 0) return true;\n  std::string mine = credential_line(getpid());',
    tests: ['test/warm.test.ts'],
    project: 'process-group',
    model: true,
  },
  {
    id: 'darwin-quiet-one-walk',
    what: 'darwin (the model): quiescence from one empty walk, even once members were found outside the group',
    file: 'native/posix/tier_process_group.cc',
    search: 'walks < (found_outside_ ? kQuietWalks : 1); walks++)',
    replace: 'walks < 1; walks++)',
    tests: ['test/process-group-escapes.test.ts'],
    project: 'process-group',
    model: true,
    guarded: { by: 'darwin-quiet-one-snapshot-walk', why: "a walk that is settled cannot have missed a hopper: XNU's listing is one snapshot taken under proc_list_lock (xnu-11417.101.15 bsd/kern/proc_info.c:401-475), so the member's parent was listed, and it was either alive when read (found) or gone (the walk not settled); the walk also lists again itself when something listed was gone (caught in 2 of 3 runs on 2026-12-07 by the other-user tests, not reproduced in 6 traced runs: docs/mutants.md)" },
  },
  {
    id: 'darwin-quiet-one-unsettled-walk',
    what: 'darwin (the model): quiescence from one walk that found nothing, settled or not',
    file: 'native/posix/tier_process_group.cc',
    search: 'settled = swept_settled_;\n    }\n    trace("quiescence',
    replace: 'settled = true;\n      walks = kQuietWalks;\n    }\n    trace("quiescence',
    tests: ['test/process-group-escapes.test.ts'],
    project: 'process-group',
    model: true,
    guarded: { by: 'darwin-quiet-one-snapshot-walk', why: "the walk lists again itself, up to kGoneListings times, when a process it listed was gone when read (native/darwin/tree.cc), and finds the hopper's next generation there" },
  },
  {
    id: 'darwin-quiet-one-snapshot-walk',
    what: 'darwin (the model): quiescence from one walk that is a snapshot (one listing, not listed again when a process it listed was gone when read), settled or not',
    file: 'native/posix/tier_process_group.cc',
    search: 'settled = swept_settled_;\n    }\n    trace("quiescence',
    replace: 'settled = true;\n      walks = kQuietWalks;\n    }\n    trace("quiescence',
    also: [
      {
        file: 'native/darwin/tree.cc',
        search: 'for (int round = 0; go_on && round < 8; round++) {',
        replace: 'for (int round = 0; go_on && round < 1; round++) {',
      },
    ],
    tests: ['test/process-group-escapes.test.ts'],
    project: 'process-group',
    model: true,
  },
  {
    id: 'pg-in-exit-not-member',
    what: 'process-group tier (Linux): a process read in its exit, its environment gone, is taken for a non-member (the walk settles)',
    file: 'native/posix/tree_marker.cc',
    search: '    walk.went = cordon::exiting_or_gone(p.pid, p.start_time);',
    replace: '    walk.went = !cordon::same_process_alive(p.pid, p.start_time);',
    tests: ['test/process-group-escapes.test.ts'],
    project: 'process-group',
  },
  {
    id: 'darwin-in-exit-not-member',
    what: 'darwin (the model): a process read in its exit (kern.procargs2 EINVAL, PROC_FLAG_INEXIT) is taken for a non-member',
    file: 'native/posix/tree_marker.cc',
    search: '    walk.went = cordon::exiting_or_gone(p.pid, p.start_time);',
    replace: '    walk.went = !cordon::same_process_alive(p.pid, p.start_time);',
    tests: ['test/process-group-escapes.test.ts'],
    project: 'process-group',
    model: true,
  },
  {
    id: 'darwin-gone-visited',
    what: 'darwin (the model): a process that went as it was read is not read again by the next listing of the walk',
    file: 'native/darwin/tree.cc',
    search: '        visited.erase({in.pid, in.start});',
    replace: '',
    tests: ['test/process-group-escapes.test.ts'],
    project: 'process-group',
    model: true,
  },
  {
    id: 'quiet-waits-for-exit',
    what: "a tree's result waits for its anchor's own exit after its QUIET, as it did before",
    file: 'lib/anchor/posix.ts',
    search: '    this.letsGoAtQuiet = warm?.started !== undefined || execStringsOwn(started.pid, spec.path);',
    replace: '    this.letsGoAtQuiet = false;',
    tests: ['test/warm.test.ts'],
    project: 'cgroup',
  },
  {
    id: 'terminate-before-output',
    what: 'terminate() resolves at the tree\'s quiescence, before the output its pipes carried is read and the result is out',
    file: 'lib/process.ts',
    search: '    return this.facts.quiescent.then(() => this.settlement.afterQuiescence());',
    replace: '    return this.facts.quiescent;',
    tests: ['test/stopping.test.ts'],
    project: 'process-group',
  },
  {
    id: 'quiet-keeps-cwd',
    what: "an anchor that sent QUIET, its host no longer waiting for its exit, still holds the command's working directory",
    file: 'native/posix/anchor.cc',
    search: '          if (chdir("/") != 0) trace("chdir /: %s", strerror(errno));',
    replace: '',
    tests: ['test/warm.test.ts'],
    project: 'cgroup',
  },
  {
    id: 'quiet-keeps-exec-strings',
    what: "a cold anchor that sent QUIET, its host no longer waiting for its exit, still shows the command's arguments and environment",
    file: 'native/posix/anchor.cc',
    search: '          overwrite_exec_strings();',
    replace: '',
    tests: ['test/warm.test.ts'],
    project: 'cgroup',
  },
  {
    id: 'darwin-freeze-sigkill',
    what: "darwin (the model): the forced stop's freeze sends SIGKILL instead of SIGSTOP (a killed hopper's child is reparented, its lineage lost)",
    file: 'native/posix/tier_process_group.cc',
    search: 'int rc = cordon::signal_member(getpid(), group_, m, SIGSTOP, host_.pidfd());',
    replace: 'int rc = cordon::signal_member(getpid(), group_, m, SIGKILL, host_.pidfd());',
    tests: ['test/process-group-escapes.test.ts'],
    project: 'process-group',
    model: true,
  },
  {
    id: 'pty-hangup-once',
    what: "a terminal's stop sends SIGHUP once: no second hang-up for a root that outlives the first (an interactive bash can lose it)",
    file: 'native/posix/anchor.cc',
    search: 'if (!hangup_again_pending() || t - terminate_started_ < kHangupAgainMs) return;',
    replace: 'return;',
    tests: ['test/pty.test.ts'],
    project: 'subreaper',
  },
  {
    id: 'pty-kept-open',
    what: 'the terminal released (no process holds it), the anchor keeps a copy of it open: a member could open it again',
    file: 'native/posix/pty_relay.cc',
    search: '      trace("terminal released (%s)", n == 0 ? "EOF" : strerror(errno));\n      close_fd(master_);',
    replace: '      trace("terminal released (%s)", n == 0 ? "EOF" : strerror(errno));\n      (void)!dup(master_);\n      close_fd(master_);',
    also: [
      {
        file: 'native/posix/pty_relay.cc',
        search: '  trace("terminal released (%s)", errno == 0 ? "EOF" : strerror(errno));\n  close_fd(master_);',
        replace: '  trace("terminal released (%s)", errno == 0 ? "EOF" : strerror(errno));\n  (void)!dup(master_);\n  close_fd(master_);',
      },
    ],
    tests: ['test/pty.test.ts'],
    project: 'cgroup',
  },
];

function parseArgs(argv) {
  const a = { only: undefined, list: false, keep: false, baseline: false, guarded: false, timeoutMin: 15 };
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i];
    if (x === '--only') a.only = argv[++i].split(',');
    else if (x === '--list') a.list = true;
    else if (x === '--keep') a.keep = true;
    else if (x === '--baseline') a.baseline = true;
    else if (x === '--guarded') a.guarded = true;
    else if (x === '--timeout-min') a.timeoutMin = Number(argv[++i]);
    else throw new Error(`mutants: unknown argument ${x} (see the header of scripts/mutants.mjs)`);
  }
  return a;
}

/** Runs a command in `cwd`, its own process group, killed by that group's id past `ms`. */
async function run(cmd, args, cwd, ms) {
  const r = await runInGroup(cmd, args, { cwd, timeoutMs: ms });
  return { code: r.code, signal: r.signal, out: r.all, timedOut: r.timedOut, ms: r.ms };
}

/** A scratch copy of HEAD, with this checkout's build/ and dist/ (times kept) and its node_modules linked. */
function scratchCopy() {
  const dir = mkdtempSync(join(tmpdir(), 'cordon-mutants-'));
  execFileSync('sh', ['-c', `git -C "${ROOT}" archive HEAD | tar -x -C "${dir}"`]);
  for (const d of ['build', 'dist']) if (existsSync(join(ROOT, d))) cpSync(join(ROOT, d), join(dir, d), { recursive: true, preserveTimestamps: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

/** The titles of the failed tests of a vitest JSON report, if any. */
function failedTests(reportPath) {
  try {
    const r = JSON.parse(readFileSync(reportPath, 'utf8'));
    const failed = [];
    for (const f of r.testResults ?? []) for (const t of f.assertionResults ?? []) if (t.status === 'failed') failed.push(t.title);
    if (failed.length === 0 && r.success === false) failed.push('(the run failed outside any test: a leak, a setup error)');
    return failed;
  } catch {
    return ['(no report)'];
  }
}

/** npm's own node-gyp (the one `npm run build:native` runs), for an incremental build. */
const NODE_GYP = join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');

async function build(dir, file, log) {
  if (file.startsWith('native/')) {
    // Incremental (only what changed is recompiled); without npm's node-gyp,
    // the full rebuild of `npm run build:native`.
    const r = existsSync(NODE_GYP) ? await run(process.execPath, [NODE_GYP, 'build'], dir, 20 * 60_000) : await run('npm', ['run', 'build:native'], dir, 20 * 60_000);
    if (r.code !== 0) {
      log(r.out.slice(-3000));
      return false;
    }
  } else {
    const r = await run('npx', ['tsc', '-p', 'tsconfig.json'], dir, 10 * 60_000);
    if (r.code !== 0) {
      log(r.out.slice(-3000));
      return false;
    }
  }
  return true;
}

async function runTests(dir, m, args, tag) {
  const report = join(dir, `.mutant-${m.id}-${tag}.json`);
  rmSync(report, { force: true });
  // (The model's lane builds the darwin sources of the copy itself, mutated or not.)
  const r = m.model
    ? await run('bash', ['.ci/darwin-model.sh', report, '--project', m.project, ...m.tests], dir, args.timeoutMin * 60_000)
    : await run('npx', ['vitest', 'run', '--project', m.project, '--reporter=json', `--outputFile=${report}`, ...m.tests], dir, args.timeoutMin * 60_000);
  const left = killScratchPrograms(dir);
  if (left.length > 0) process.stderr.write(`mutants: ${m.id}: SIGKILLed ${left.length} process(es) still running a program of the scratch copy: ${left.join(', ')}\n`);
  return { ...r, failed: r.code === 0 ? [] : r.timedOut ? [`(timed out after ${args.timeoutMin} min)`] : failedTests(report) };
}

/**
 * SIGKILLs every process running a program of the scratch copy (its
 * cordon-anchor above all), by pid, and returns their pids. A mutant that
 * breaks the stop can leave its anchor running after its tests, untagged
 * (a warm anchor's environment is its own): seen once, a mutated anchor
 * still retrying its stop 52 minutes later.
 */
function killScratchPrograms(dir) {
  const killed = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let exe;
    try {
      exe = readlinkSync(`/proc/${name}/exe`);
    } catch {
      continue; // gone, or not ours to read
    }
    if (!exe.startsWith(`${dir}/`)) continue;
    try {
      process.kill(Number(name), 'SIGKILL');
      killed.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return killed;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const chosen = args.only ? MUTANTS.filter((m) => args.only.includes(m.id)) : MUTANTS.filter((m) => args.guarded || !m.guarded);
  if (args.only) for (const id of args.only) if (!MUTANTS.some((m) => m.id === id)) throw new Error(`mutants: no mutant ${id}`);
  if (args.list) {
    for (const m of chosen) console.log(`${m.id}\t${m.file}\t${m.project}${m.model ? ' (on the model of XNU)' : ''}: ${m.tests.join(' ')}\n\t${m.what}`);
    return;
  }
  const dir = scratchCopy();
  const head = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const log = (s) => process.stderr.write(`${s}\n`);
  log(`mutants: scratch copy of ${head} in ${dir}`);
  const rows = [];
  try {
    // (A copy whose build/ is older than its sources rebuilds them once here.)
    if (!(await build(dir, 'native/', log))) throw new Error('mutants: the unmutated copy does not build');
    for (const m of chosen) {
      // The mutant's edit, and those it makes together with it (`also`).
      const edits = [m, ...(m.also ?? [])].map((e) => {
        const path = join(dir, e.file);
        const original = readFileSync(path, 'utf8');
        return { ...e, path, original, count: original.split(e.search).length - 1 };
      });
      const row = { m, verdict: '', ms: 0, failed: [], baseline: '' };
      rows.push(row);
      const stale = edits.find((e) => e.count !== 1);
      if (stale) {
        row.verdict = `stale (text found ${stale.count} times${stale === edits[0] ? '' : ` in ${stale.file}`})`;
        log(`mutants: ${m.id}: ${row.verdict}`);
        continue;
      }
      if (args.baseline) {
        const b = await runTests(dir, m, args, 'baseline');
        row.baseline = b.code === 0 ? 'pass' : `FAIL: ${b.failed.slice(0, 2).join('; ')}`;
        log(`mutants: ${m.id}: baseline ${row.baseline}`);
      }
      const t0 = Date.now();
      for (const e of edits) writeFileSync(e.path, e.original.replace(e.search, e.replace));
      try {
        let built = true;
        for (const kind of new Set(edits.map((e) => (e.file.startsWith('native/') ? 'native/' : e.file)))) built = built && (await build(dir, kind, log));
        if (!built) {
          row.verdict = 'no build';
        } else {
          const r = await runTests(dir, m, args, 'mutant');
          row.verdict = r.code === 0 ? 'SURVIVED' : 'caught';
          row.failed = r.failed;
        }
      } finally {
        for (const e of edits) writeFileSync(e.path, e.original);
      }
      row.ms = Date.now() - t0;
      log(`mutants: ${m.id}: ${row.verdict} (${Math.round(row.ms / 1000)} s)${row.failed.length ? `: ${row.failed.slice(0, 3).join('; ')}` : ''}`);
    }
  } finally {
    if (args.keep) log(`mutants: scratch copy kept: ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
  const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');
  console.log(`Mutants of ${head}, ${new Date().toISOString().slice(0, 10)} (node scripts/mutants.mjs):\n`);
  console.log(`| mutant | what it breaks | file | tests (project) | verdict | time | first failing tests |${args.baseline ? ' unmutated |' : ''}`);
  console.log(`| --- | --- | --- | --- | --- | --- | --- |${args.baseline ? ' --- |' : ''}`);
  for (const r of rows) {
    const tests = `${r.m.tests.map((t) => t.replace(/^test\//, '')).join(', ')} (${r.m.project}${r.m.model ? ', on the model of XNU' : ''})`;
    const failed = r.failed.slice(0, 2).map((f) => (f.length > 90 ? `${f.slice(0, 87)}...` : f)).join('; ') + (r.failed.length > 2 ? ` (+${r.failed.length - 2})` : '');
    console.log(`| ${r.m.id} | ${cell(r.m.what)} | ${r.m.file} | ${tests} | ${r.verdict} | ${Math.round(r.ms / 1000)} s | ${cell(failed)} |${args.baseline ? ` ${cell(r.baseline)} |` : ''}`);
  }
  const survived = rows.filter((r) => r.verdict === 'SURVIVED').length;
  console.log(`\n${rows.length} mutants: ${rows.filter((r) => r.verdict === 'caught').length} caught, ${survived} survived, ${rows.filter((r) => !['caught', 'SURVIVED'].includes(r.verdict)).length} not run.`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
