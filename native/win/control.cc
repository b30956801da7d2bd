// The Windows anchor's life (anchor.h): the control loop (the host's
// commands, read from the control channel, channel.h), the termination
// schedule, and the tree's life as the host hears it.
//
// One thread waits on one completion port for everything: the control
// channel's reads and writes, the job's messages (job.h), the root's exit
// (posted by a waiter on its handle, launch.h), the lease endpoint (lease.h).
// Completion comes from the job's completion port
// (JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO), with a re-check every second after
// the root exited; members are listed with JobObjectBasicProcessIdList.
//
// Nothing is ever signalled by pid: TERM sends CTRL_BREAK_EVENT to the root's
// console process group (its id is the root's pid, pinned by our open root
// handle) and WM_CLOSE to the top-level windows of the job's members (each
// member checked in the job through a handle, job.h), waits up to the grace
// for the job to empty, then TerminateJobObject (repeated every second; STUCK
// once that has gone on for protocol::kStuckReportMs with members left).
// Where GenerateConsoleCtrlEvent fails (no shared console; Wine 8 does not
// implement it) and no member has a window, no polite signal reached anyone,
// so the forced stop follows at once instead of waiting out a grace nobody
// was told about. A leased tree's anchor runs detached, with no
// console: CTRL_BREAK reaches its root by attaching to the root's console
// (not tried under Wine, which has no GenerateConsoleCtrlEvent).
//
// EXIT reports the exit code; a root ended by our TerminateJobObject reports
// signal 9 (as Node reports SIGKILL for a killed child): a forced stop under
// way and the exit code it gives (kKilledCode, which no other stop gives and
// a program seldom chooses), never a plain exit 1 that lands meanwhile; one ended by
// CTRL_BREAK (STATUS_CONTROL_C_EXIT) 21 (SIGBREAK). Then USAGE and LEFT for
// each member still there; RELEASED once nothing else holds the captured
// output (released.h), and QUIET (after USAGE again) once the job is empty.
//
// Control EOF (the host is gone: exit, crash, kill) starts the teardown; for
// a leased tree (lease.h) it starts the lease clock instead, and a leased
// tree's result is held until a host has it (DONE after QUIET), or until
// the lease ends.
#include "anchor.h"
#include "channel.h"
#include "job.h"
#include "launch.h"
#include "lease.h"
#include "pty.h"
#include "relay.h"
#include "released.h"
#include "warm.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

namespace cordon {
namespace anchor {

namespace {

using protocol::trace;

BOOL WINAPI on_console_event(DWORD) {
  // Ctrl-C / Ctrl-Break at the host's console are for the host to decide on,
  // never a reason to lose the tree's identity.
  return TRUE;
}

// How far the tree's life has been told: each stage follows the one before.
enum class Stage {
  kRunning,   // the root has not exited (or not started)
  kExited,    // the root exited: EXIT, USAGE and LEFT sent
  kReleased,  // RELEASED sent
  kQuiet,     // the job is empty: QUIET sent
  kDone,      // the host said DONE after QUIET: it has the result
};

class Anchor : public EndpointHost {
 public:
  Anchor(Options opts, bool warm) : opts_(std::move(opts)), warm_(warm) {
    if (opts_.lease_ms > 0) lease_.state = Lease::State::kAwaiting;
  }

  int run() {
    host_.out = crt_handle(3);
    host_.in = crt_handle(4);
    if (host_.out == INVALID_HANDLE_VALUE || !host_.out || host_.in == INVALID_HANDLE_VALUE || !host_.in) {
      usage("no control channel at fds 3 and 4");
    }
    // Only the anchor holds the control channel: the command must not inherit it.
    SetHandleInformation(host_.out, HANDLE_FLAG_INHERIT, 0);
    SetHandleInformation(host_.in, HANDLE_FLAG_INHERIT, 0);
    SetConsoleCtrlHandler(on_console_event, TRUE);
    port_ = CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 1);
    if (!port_ || !CreateIoCompletionPort(host_.in, port_, kKeyControl, 0) ||
        !CreateIoCompletionPort(host_.out, port_, kKeyOut, 0)) {
      trace("completion port: error %lu", GetLastError());
      return 70;
    }
    start_read();

    // A warm anchor knows its host first (warm::HostWatch).
    if (warm_ && !host_watch_.open()) return finish();
    if ((opts_.job_from_host || leased()) && !receive_first_lines()) return finish();
    // A warm anchor: from here on exactly a cold one, with the LAUNCH's
    // arguments, environment and stdio (warm.h).
    if (warm_ && !take_launch()) return finish();
    if (leased() && !lease_can_hold()) return finish();
    if (!open_job()) return finish();
    if (leased() && !open_endpoint()) return finish();
    if (opts_.pty_cols > 0 && !open_terminal()) return finish();
    if (leased()) relays_.start(opts_);
    released_.start(opts_.watch_fds);
    const HANDLE channel[2] = {host_.out, host_.in};
    std::string failed = launch(opts_, leased(), job_, port_, channel, root_, pty_.active() ? &pty_ : nullptr);
    if (!failed.empty()) {
      send(failed);
      return finish();
    }
    pty_.start(port_);  // (the host's pipes are the relay's: release_stdio() closes neither)
    release_stdio();
    if (limits_asked(opts_)) send(job_.limits_report());
    send(protocol::ready(root_.pid, job_.tier(), false, std::string()));
    if (pending_signal_ != 0) signal_root(pending_signal_);
    loop();
    return finish();
  }

  // ---- EndpointHost

  bool attached() const override { return host_.state != Host::State::kDetached; }
  bool adopted() const override { return host_.state == Host::State::kAdopter; }
  bool root_running() const override { return root_.process && stage_ == Stage::kRunning; }

  void adopt(HANDLE pipe) override {
    trace("adopted: replaying %zu line(s)", history_.size());
    host_.state = Host::State::kAdopter;
    host_.write_failed = false;
    writer_.next_host();
    host_.out = pipe;
    host_.in = pipe;
    write(host_.out,
          protocol::adopted(relays_.logging() ? win::utf8(opts_.log) : std::string(), relays_.find(1) != nullptr,
                            relays_.find(2) != nullptr),
          nullptr);
    for (auto& line : history_) write(host_.out, line, nullptr);
    control_lines_ = protocol::LineReader(true);
    start_read();
  }

  bool write(HANDLE pipe, const std::string& line, HANDLE close_after) override {
    return writer_.write(pipe, line, close_after);
  }

 private:
  bool leased() const { return lease_.state != Lease::State::kNone; }
  // No host is attached and the lease holds the tree: its clock runs.
  bool lease_clock_running() const {
    return lease_.state == Lease::State::kHeld && host_.state == Host::State::kDetached;
  }

  // --job-from-host: the first control line is `JOB <handle value>`, a
  // handle the host duplicated into this process (0: the host could not);
  // --lease: then `LEASE <ms> <token>`. Bounded: a host that never sends JOB
  // gets NOCONTAIN (or process-handle); a leased tree without its LEASE line
  // does not start (NOCONTAIN EINVAL lease).
  bool receive_first_lines() {
    int64_t deadline = now_ms() + 30000;
    auto waiting = [&] {
      return (opts_.job_from_host && !job_.received()) || lease_.state == Lease::State::kAwaiting ||
             (warm_ && !launch_taken_ && !launch_refused_);
    };
    while (waiting() && host_.open()) {
      int64_t left = deadline - now_ms();
      // (A warm anchor waits for its LAUNCH as long as the host keeps it: its
      // JOB line came with its start.)
      const bool job_due = opts_.job_from_host && !job_.received();
      if (left <= 0 && job_due) {
        trace("no JOB line from the host");
        break;
      }
      // A warm anchor looks at its host every kHostCheckMs while it waits.
      DWORD wait = job_due ? static_cast<DWORD>(left) : INFINITE;
      if (warm_) {
        if (now_ms() >= next_host_check_) {
          if (!host_watch_.unchanged()) return false;
          next_host_check_ = now_ms() + warm::kHostCheckMs;
        }
        wait = std::min<DWORD>(wait, static_cast<DWORD>(std::max<int64_t>(1, next_host_check_ - now_ms())));
      }
      DWORD bytes = 0;
      ULONG_PTR key = 0;
      OVERLAPPED* ov = nullptr;
      BOOL ok = GetQueuedCompletionStatus(port_, &bytes, &key, &ov, wait);
      if (!ok && !ov) continue;
      dispatch(ok, bytes, key, ov);
    }
    if (!host_.open()) return false;  // the host gone before the job came: nothing ran
    if (warm_ && !launch_taken_) return false;  // no well-formed LAUNCH: nothing runs
    if (lease_.state == Lease::State::kAwaiting) {
      send(protocol::no_contain(EINVAL, "lease"));
      return false;
    }
    return true;
  }

  // Whether the lease can outlive the host where this anchor runs (lease.h),
  // before anything of the command exists. false: NOCONTAIN EPERM lease-job
  // <LimitFlags> sent (nothing runs).
  bool lease_can_hold() {
    OwnJob job = read_own_job();
    trace("lease: %s", !job.in_job ? "the anchor runs in no Job Object"
                       : !job.limits_read ? "the anchor runs in a Job Object whose limits cannot be read"
                                          : job.test_hook ? "the anchor runs in a Job Object (limits from CORDON_TEST_JOB_LIMITS)"
                                                          : "the anchor runs in a Job Object");
    if (job.in_job && job.limits_read) trace("lease: its immediate job's LimitFlags 0x%lx", static_cast<unsigned long>(job.limit_flags));
    DWORD refused = lease_refused_by(job);
    if (!refused) return true;
    char flags[16];
    snprintf(flags, sizeof flags, "%lx", static_cast<unsigned long>(refused));
    send(protocol::no_contain(EPERM, "lease-job", flags));
    return false;
  }

  // The job, with its limits, before the command exists. false: NOCONTAIN
  // sent (nothing runs); under --best-effort a job that cannot be had leaves
  // the tier process-handle.
  bool open_job() {
    DWORD err = job_.open(opts_.job_from_host, port_);
    if (!err) return set_limits();
    trace("job: error %lu", err);
    job_.close();
    if (!opts_.best_effort) {
      send(protocol::no_contain(win::errno_from(err), "job-object"));
      return false;
    }
    return true;
  }

  // The limits asked for, on the job before the command exists. false: one
  // was refused without --best-effort (NOCONTAIN sent; nothing runs).
  bool set_limits() {
    if (!limits_asked(opts_)) return true;
    // A leased console program gets a console host of its own, in the job
    // (launch.cc: CREATE_NO_WINDOW), which the process limit must not count.
    const int console_hosts = leased() && opts_.pty_cols == 0 && win::console_program(opts_.path) ? 1 : 0;
    DWORD err = job_.set_limits(opts_, console_hosts);
    if (!err || opts_.best_effort) return true;
    send(protocol::no_contain(win::errno_from(err), "limits"));
    return false;
  }

  // --pty: the pseudo console, its console host in the job, before the
  // command exists (pty.h). false: NOCONTAIN <errno> pty sent (nothing runs):
  // no ConPTY on this Windows (ENOSYS), a leased tree (a terminal that
  // outlives its host is POSIX's only, so far), or a console that cannot be
  // made or contained (best-effort runs with a console host outside the job).
  bool open_terminal() {
    if (!PseudoConsole::available()) {
      trace("pty: no CreatePseudoConsole in kernel32");
      send(protocol::no_contain(ENOSYS, "pty"));
      return false;
    }
    if (leased()) {
      trace("pty: refused for a leased tree");
      send(protocol::no_contain(ENOSYS, "pty"));
      return false;
    }
    DWORD err = pty_.open(opts_.pty_cols, opts_.pty_rows, job_);
    if (pty_.host_pid()) job_.set_not_member(pty_.host_pid());
    if (!err || (pty_.active() && opts_.best_effort)) return true;
    send(protocol::no_contain(win::errno_from(err), "pty"));
    return false;
  }

  // The lease endpoint's first instance, before anything runs.
  bool open_endpoint() {
    DWORD err = endpoint_.open(port_, opts_.lease_id, opts_.grace_ms);
    if (!err) return true;
    send(protocol::no_contain(win::errno_from(err), "lease-endpoint"));
    return false;
  }

  // The lease clock ran out with no host: the teardown EOF does without a
  // lease. The endpoint keeps answering (DENIED expired) until the anchor
  // exits: a name it let go of while alive could be taken by anyone, and an
  // adopter's liveness check of the anchor would still pass.
  void lease_expired() {
    lease_.state = Lease::State::kExpired;
    trace("lease ran out: terminating tree");
    start_terminate(opts_.grace_ms);
  }

  // ---- the control channel

  void start_read() {
    if (!host_.open()) return;
    ZeroMemory(&read_ov_, sizeof read_ov_);
    if (!ReadFile(host_.in, read_buf_, sizeof read_buf_, nullptr, &read_ov_) && GetLastError() != ERROR_IO_PENDING) {
      trace("control read: error %lu", GetLastError());
      control_eof();
    }
  }

  void control_eof() {
    if (!host_.open()) return;
    if (lease_.state == Lease::State::kHeld) {
      // The host is gone, the lease holds the tree: the clock starts (again, in full).
      writer_.next_host();
      CloseHandle(host_.in);
      if (host_.state != Host::State::kAdopter) CloseHandle(host_.out);
      host_.in = host_.out = INVALID_HANDLE_VALUE;
      host_.state = Host::State::kDetached;
      lease_.deadline = now_ms() + lease_.ms;
      trace("control channel closed: lease clock started (%d ms)", lease_.ms);
      return;
    }
    // The host is gone (exit, crash, kill): carry out the teardown alone.
    trace("control channel closed: terminating tree");
    host_.state = Host::State::kGone;
    start_terminate(opts_.grace_ms);
  }

  // SIGNAL <n>: what Node's ChildProcess.kill does on Windows for SIGTERM,
  // SIGKILL and SIGINT (the host sends no other): TerminateProcess with 1.
  void signal_root(int signal) {
    BOOL ok = TerminateProcess(root_.process, 1);
    trace("signal %d to the root %lu: TerminateProcess %s", signal, static_cast<unsigned long>(root_.pid), ok ? "ok" : "failed");
  }

  // A warm anchor before its LAUNCH: only JOB may come first; what follows
  // the LAUNCH is read as control lines.
  void on_warm_control(DWORD bytes) {
    launch_reader_.feed(read_buf_, bytes);
    for (;;) {
      std::string line;
      auto r = launch_reader_.next(line, launch_);
      if (r == warm::Reader::kMore) break;
      if (r == warm::Reader::kLine) {
        auto c = protocol::parse_command(line, opts_.grace_ms, !job_.received());
        if (c.verb == protocol::Verb::kJob) {
          job_.receive(c.arg);
          continue;
        }
        trace("warm: a control line other than JOB before the LAUNCH");
      }
      if (r == warm::Reader::kLaunch) {
        launch_taken_ = true;
        std::string rest = std::move(launch_.rest);
        control_lines(rest.data(), rest.size());
      } else {
        launch_refused_ = true;
      }
      break;
    }
    if (!launch_refused_) start_read();
  }

  // The LAUNCH's arguments replace the warm anchor's (the same tier and
  // best-effort, no lease, terminal or limits: the host starts those cold),
  // then its environment and stdio (warm::become).
  bool take_launch() {
    std::vector<std::wstring> wide;
    wide.push_back(L"cordon-anchor.exe");
    for (const auto& a : launch_.args) wide.push_back(win::wide(a));
    std::vector<wchar_t*> argv;
    for (auto& w : wide) argv.push_back(&w[0]);
    Options o = parse_args(static_cast<int>(argv.size()), argv.data(), true);
    if (!o.job_from_host || o.best_effort != opts_.best_effort || o.lease_ms > 0 || !o.lease_id.empty() ||
        !o.log.empty() || o.pty_cols > 0 || limits_asked(o)) {
      trace("warm: LAUNCH refused: not this warm anchor's, or a lease, a terminal or limits");
      return false;
    }
    // (And once more now: a host that changed since the last look gets nothing run.)
    if (!host_watch_.unchanged()) return false;
    const HANDLE channel[2] = {host_.out, host_.in};
    if (!warm::become(launch_, channel)) return false;
    opts_ = std::move(o);
    launch_ = warm::Launch();
    return true;
  }

  void on_control(DWORD bytes) {
    if (warm_ && !launch_taken_) {
      on_warm_control(bytes);
      return;
    }
    control_lines(read_buf_, bytes);
    start_read();
  }

  void control_lines(const char* data, size_t n) {
    std::vector<std::string> lines;
    control_lines_.feed(data, n, lines);
    for (auto& line : lines) {
      auto c = protocol::parse_command(line, opts_.grace_ms, opts_.job_from_host && !job_.received());
      if (c.verb == protocol::Verb::kLease) {
        // Only the first LEASE counts (and only with --lease).
        if (lease_.state == Lease::State::kAwaiting) {
          lease_.state = Lease::State::kHeld;
          lease_.ms = c.grace_ms;
          lease_.token = c.arg;
          trace("lease %d ms", lease_.ms);
        }
      } else if (c.verb == protocol::Verb::kJob) {
        job_.receive(c.arg);
      } else if (c.verb == protocol::Verb::kTerm || c.verb == protocol::Verb::kKill) {
        start_terminate(c.grace_ms);
      } else if (c.verb == protocol::Verb::kSignal && stage_ == Stage::kRunning) {
        // (One read before the root was started is carried out once it is.)
        if (root_.process) signal_root(c.signal);
        else pending_signal_ = c.signal;
      } else if (c.verb == protocol::Verb::kResize) {
        pty_.resize(c.cols, c.rows);
      } else if (c.verb == protocol::Verb::kDone && stage_ >= Stage::kQuiet) {
        stage_ = Stage::kDone;
      }
    }
  }

  void send(const std::string& line) {
    if (leased()) history_.push_back(line);  // replayed to an adopter
    if (!host_.writable()) return;
    // (Freed when its completion is dequeued.)
    if (!writer_.write(host_.out, line, nullptr)) host_.write_failed = true;
  }

  void write_done(BOOL ok, OVERLAPPED* ov) {
    if (writer_.done(ok, ov) && !leased()) host_.write_failed = true;
  }

  // ---- the tree

  std::vector<Member> members() {
    std::vector<Member> out;
    if (job_.held()) {
      job_.list(out);
    } else if (root_.process && WaitForSingleObject(root_.process, 0) == WAIT_TIMEOUT) {
      Member m;
      m.pid = root_.pid;
      out.push_back(m);
    }
    return out;
  }

  // Every member is gone (a terminal's console host is none).
  bool members_gone() {
    if (job_.held()) return job_.empty();
    return stage_ >= Stage::kExited;
  }

  // Quiescent: every member gone and, with a terminal, its output over (the
  // console host gone with it).
  bool tree_empty() { return members_gone() && pty_.output_over(); }

  // USAGE: what the tree used (-1: not measured); nothing without a job.
  void send_usage() {
    std::string usage = job_.usage_report();
    if (!usage.empty()) send(usage);
  }

  void on_root_exit() {
    if (stage_ != Stage::kRunning) return;
    stage_ = Stage::kExited;
    DWORD code = 0;
    GetExitCodeProcess(root_.process, &code);
    trace("root exited code=%lu", code);
    if (teardown_.schedule.forcing() && code == kKilledCode) {
      send(protocol::exit(-1, 9));
    } else if (teardown_.break_sent && code == kControlCExit) {
      send(protocol::exit(-1, 21));
    } else {
      send(protocol::exit(code, 0));
    }
    send_usage();
    auto left = members();
    trace("%zu member(s) left (active %d)", left.size(), job_.active());
    for (auto& m : left) {
      if (m.pid == static_cast<int64_t>(root_.pid)) continue;
      send(protocol::left(m.pid, false, m.command));
    }
    send(protocol::left_end());
    check_released();
  }

  // Closes each watched output nobody else holds; RELEASED once all are
  // closed after the root exited.
  void check_released() {
    released_.check();
    if (stage_ == Stage::kExited && released_.released() && pty_.output_over()) send_released();
  }

  void send_released() {
    if (stage_ >= Stage::kReleased) return;
    stage_ = Stage::kReleased;
    send(protocol::released());
  }

  // ---- the termination schedule

  void start_terminate(int grace_ms) {
    const bool polite = teardown_.schedule.start(grace_ms, now_ms()) && grace_ms > 0;
    if (polite && pty_.active()) {
      // A terminal's processes are on the pseudo console, not on a console
      // the anchor shares (no CTRL_BREAK reaches them from here): the polite
      // stop is the terminal closing, as on POSIX (SIGHUP): the console
      // sends its processes CTRL_CLOSE_EVENT. And WM_CLOSE to the windows.
      int closed = job_.close_windows();
      pty_.close();
      trace("terminal closed as the polite stop (%d window(s) told to close too)", closed);
    } else if (polite) {
      // The root leads its own console process group (CREATE_NEW_PROCESS_GROUP);
      // its id stays pinned by our root handle even after the root exited.
      // And WM_CLOSE to the members' windows: a program with windows gets
      // no CTRL_BREAK (and one without a console has none to get it on).
      bool broke = ctrl_break();
      DWORD err = GetLastError();
      int closed = job_.close_windows();
      if (broke) {
        teardown_.break_sent = true;
      } else if (closed == 0) {
        trace("CTRL_BREAK not delivered (error %lu) and no window to close: forced stop now", err);
        teardown_.schedule.force_now(now_ms());
      } else {
        trace("CTRL_BREAK not delivered (error %lu): the grace is for the %d window(s) told to close", err, closed);
      }
    }
  }

  // After the root exited, CTRL_BREAK to its group "succeeds" whether or not
  // any process gets it (the group's id stays valid): it reaches only a
  // member attached to this console, so without one none is sent, and the
  // grace is not waited out for nobody. (A member on the console in another
  // group still does not get it: Windows does not say which group a process
  // is in.) False, with ERROR_NOT_FOUND, when no member is on the console.
  bool member_on_console() {
    std::vector<DWORD> attached(64);
    DWORD n = GetConsoleProcessList(attached.data(), static_cast<DWORD>(attached.size()));
    if (n > attached.size()) {
      attached.resize(n + 16);
      n = GetConsoleProcessList(attached.data(), static_cast<DWORD>(attached.size()));
    }
    if (n == 0 || n > attached.size()) return true;  // (not known: sent as before)
    attached.resize(n);
    for (const Member& m : members()) {
      for (DWORD pid : attached) {
        if (static_cast<int64_t>(pid) == m.pid) return true;
      }
    }
    trace("CTRL_BREAK: the root is gone and no member is on this console");
    SetLastError(ERROR_NOT_FOUND);
    return false;
  }

  // CTRL_BREAK to the root's console process group. A leased tree's anchor
  // has no console (it runs detached): it joins the root's first.
  bool ctrl_break() {
    if (stage_ >= Stage::kExited && !member_on_console()) return false;
    if (GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, root_.pid)) return true;
    if (!leased() || !root_.process || stage_ != Stage::kRunning) return false;
    DWORD err = GetLastError();
    // Wine 8 has no CTRL_BREAK at all, and there the console switch below
    // cost the anchor its life (seen in test/win/adopt.test.mjs: it vanished
    // right after the forced stop, before QUIET): not tried there.
    if (win::under_wine()) return false;
    FreeConsole();
    if (!AttachConsole(root_.pid)) {
      SetLastError(err);
      return false;
    }
    SetConsoleCtrlHandler(on_console_event, TRUE);
    bool sent = GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, root_.pid) != 0;
    // Detached again at once: an anchor attached to the root's console would
    // keep its console host (a job member) alive until the forced stop.
    FreeConsole();
    return sent;
  }

  void step_terminate() {
    int64_t t = now_ms();
    if (t < teardown_.schedule.deadline()) return;
    if (teardown_.schedule.force_due(t)) {
      teardown_.last_force = 0;
      trace("forced stop: TerminateJobObject");
    }
    if (t - teardown_.last_force >= 1000) {
      teardown_.last_force = t;
      if (job_.held()) job_.terminate();
      else if (stage_ == Stage::kRunning) TerminateProcess(root_.process, kKilledCode);
    }
    if (teardown_.schedule.stuck_due(t) && !tree_empty()) {
      teardown_.schedule.stuck_reported();
      send(protocol::stuck(members()));
    }
  }

  // ---- the loop

  void loop() {
    for (;;) {
      if (stage_ >= Stage::kExited && tree_empty()) {
        send_released();
        if (stage_ < Stage::kQuiet) {
          stage_ = Stage::kQuiet;
          trace("quiescent");
          send_usage();
          send(protocol::quiescent());
        }
        // A leased tree's result is held until a host has it (DONE): an
        // adopter's, if the host is gone (or dies before DONE), until the
        // lease ends.
        if (lease_.state != Lease::State::kHeld || stage_ == Stage::kDone) {
          if (stage_ == Stage::kDone) trace("the host has the result");
          return;
        }
      }
      if (lease_clock_running() && now_ms() >= lease_.deadline) lease_expired();
      endpoint_.tick(now_ms());
      if (teardown_.schedule.active()) step_terminate();
      // A terminal whose members are all gone: closed, so that its console
      // host gives its last output and exits (the output's end).
      if (pty_.active() && stage_ >= Stage::kExited && members_gone()) pty_.close();
      check_released();
      DWORD timeout = INFINITE;
      if (teardown_.schedule.active()) {
        timeout = static_cast<DWORD>(teardown_.schedule.wait_ms(now_ms(), 50, 50));
      } else if (stage_ >= Stage::kExited && job_.held()) {
        // ACTIVE_PROCESS_ZERO wakes us; a slow re-check covers a lost message.
        timeout = 1000;
      }
      if (released_.watching() && timeout > 100) timeout = 100;
      // (A terminal's members are looked at often: the console host keeps the job's count above zero.)
      if (pty_.active() && stage_ >= Stage::kExited && !pty_.output_over() && timeout > 100) timeout = 100;
      if (lease_clock_running()) {
        int64_t left = lease_.deadline - now_ms();
        DWORD until = static_cast<DWORD>(left < 0 ? 0 : left);
        if (until < timeout) timeout = until;
      }
      timeout = endpoint_.wait_ms(now_ms(), timeout);
      DWORD bytes = 0;
      ULONG_PTR key = 0;
      OVERLAPPED* ov = nullptr;
      BOOL ok = GetQueuedCompletionStatus(port_, &bytes, &key, &ov, timeout);
      if (!ok && !ov) continue;  // timeout
      dispatch(ok, bytes, key, ov);
    }
  }

  void dispatch(BOOL ok, DWORD bytes, ULONG_PTR key, OVERLAPPED* ov) {
    if ((key == kKeyControl || key == kKeyEndpoint) && ov == &read_ov_) {
      if (!ok || bytes == 0) control_eof();
      else on_control(bytes);
    } else if (key == kKeyEndpoint && endpoint_.handle(ok, bytes, ov)) {
      // (the endpoint's own: a connection, a client's line)
    } else if ((key == kKeyOut || key == kKeyEndpoint) && ov) {
      write_done(ok, ov);
    } else if (key == kKeyJob) {
      job_.on_message(bytes);
    } else if (key == kKeyRoot) {
      on_root_exit();
    }
    // (kKeyTerminal, the terminal's output is over: the loop looks again.)
  }

  int finish() {
    // A terminal's last output reaches the host's pipe (bounded), then its EOF.
    pty_.finish();
    // The relays end once the tree's writers are gone; what they still copy
    // reaches its reader before the anchor exits (bounded).
    released_.close();
    relays_.wait();
    // Let the last lines reach the host before the channel closes.
    int64_t until = now_ms() + 2000;
    while (writer_.pending() > 0 && now_ms() < until) {
      DWORD bytes = 0;
      ULONG_PTR key = 0;
      OVERLAPPED* ov = nullptr;
      BOOL ok = GetQueuedCompletionStatus(port_, &bytes, &key, &ov, 100);
      if (!ok && !ov) continue;
      bool endpoint_io = key == kKeyEndpoint && ov && (ov == &read_ov_ || endpoint_.owns(ov));
      if ((key == kKeyOut || key == kKeyEndpoint) && ov && !endpoint_io) write_done(ok, ov);
    }
    return 0;
  }

  Options opts_;
  const bool warm_;
  warm::Reader launch_reader_;
  warm::Launch launch_;
  bool launch_taken_ = false;
  bool launch_refused_ = false;
  warm::HostWatch host_watch_;
  int64_t next_host_check_ = 0;
  HANDLE port_ = nullptr;
  Host host_;
  OVERLAPPED read_ov_;
  char read_buf_[512];
  protocol::LineReader control_lines_{true};
  Writer writer_;
  std::vector<std::string> history_;  // every line sent (when leased), for the replay
  Job job_;
  Root root_;
  Stage stage_ = Stage::kRunning;
  int pending_signal_ = 0;  // a SIGNAL read before the root was started
  struct {
    protocol::Termination schedule;
    bool break_sent = false;  // CTRL_BREAK reached the root's group: its STATUS_CONTROL_C_EXIT is SIGBREAK
    int64_t last_force = 0;   // the last TerminateJobObject (again every second while forcing)
  } teardown_;
  ReleaseWatch released_;
  Lease lease_;
  Relays relays_;  // a leased tree's captured streams
  PseudoConsole pty_;  // --pty: the terminal
  Endpoint endpoint_{*this, lease_, relays_};
};

}  // namespace

int run(Options opts, bool warm) {
  Anchor anchor(std::move(opts), warm);
  return anchor.run();
}

}  // namespace anchor
}  // namespace cordon
