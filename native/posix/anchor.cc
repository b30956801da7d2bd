// cordon-anchor: the per-tree anchor process (POSIX).
//
// The host spawns the anchor (posix_spawn) with the command's stdio on fds
// 0-2 and the control channel on fd 3. The anchor establishes containment *before* it forks and
// execs the command (C1), holds the tree's identity for as long as anything
// may signal it (C2), carries out graceful escalation by itself (C3), reaps
// every orphan (C9) and terminates the tree when the host goes away, even by
// SIGKILL (control channel EOF).
//
// The protocol (its lines, the control channel, the command line, the
// termination schedule) is native/protocol.h, shared with the Windows anchor.
//
// What differs between the containment tiers (cgroup, subreaper,
// process-group) is a strategy each, behind one interface: tier.h.
//
// With --pty (pty_relay.h) the command's stdio is a terminal the anchor
// opens before the fork and relays: the host's fd 0 into it, its output to
// the host's fd 1.
//
// Under a lease (--lease, lease.h) the host's EOF starts the lease clock
// instead: the tree runs on, its output drained into the log, until a new
// host adopts it through the endpoint or the clock runs out (then the
// teardown, as for EOF without a lease).
//
// The anchor does not share the host's process group or session (cgroup and
// subreaper tiers: setsid() after the fork, before the command may exec), so a
// signal to the host's group cannot end it with the host.
#include "../cordon.h"
#include "../protocol.h"
#include "anchor_args.h"
#include "command_child.h"
#include "lease.h"
#include "pty_relay.h"
#include "tier.h"
#include "warm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <map>
#include <set>
#include <string>
#include <vector>

extern char** environ;

namespace {

using cordon::FileId;
using cordon::Member;
using cordon::anchor::now_ms;
namespace anchor = cordon::anchor;
namespace protocol = cordon::protocol;
namespace warm = cordon::warm;
using protocol::trace;
using cordon::anchor::send_line;

constexpr int kControlFd = 3;

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = write(g_signal_pipe[1], &b, 1);
  (void)ignored;
  errno = saved;
}

// The strings of the anchor's exec as the kernel shows them to every other
// process: Linux reads /proc/<pid>/cmdline and environ from the process's own
// memory, XNU kern.procargs2 too (vm_map_copyin of the stack's top,
// bsd/kern/kern_sysctl.c:1487-1498). A cold anchor's arguments end with the
// command's and its environment is the command's: overwritten before its
// QUIET, so that from then on nothing of the command's is found in it (its
// host no longer waits for its exit: lib/anchor/channel.ts, letsGoAtQuiet).
// Each string keeps its length, so the area is read as as many strings as
// before (procargs.h: argc counts them): an argument becomes underscores, an
// environment entry `_=` and underscores (an environment read empty is taken
// for a process in the middle of an exec, and read again:
// tier_process_group.cc). An outer tree's marker (CORDON_TREE, the host's
// own) stays.
struct ExecStrings {
  std::vector<char*> args;  // argv[1..]
  std::vector<char*> env;   // the environment the anchor was exec'd with
};
ExecStrings g_exec;

void note_exec_strings(int argc, char** argv) {
  for (int i = 1; i < argc; i++) g_exec.args.push_back(argv[i]);
  for (char** e = environ; e && *e; e++) g_exec.env.push_back(*e);
}

void overwrite_exec_strings() {
  for (char* a : g_exec.args) memset(a, '_', strlen(a));
  for (char* e : g_exec.env) {
    if (strncmp(e, "CORDON_TREE=", 12) == 0) continue;
    size_t n = strlen(e);
    memset(e, '_', n);
    if (n >= 2) e[1] = '=';
  }
  g_exec = ExecStrings();
}

// Signals the anchor must survive: a terminal's Ctrl-C, hangup or stop is for
// the host to decide on, never a reason to lose the tree's identity.
const int kIgnored[] = {SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU};

using anchor::Options;
using anchor::usage;

class Anchor : public anchor::TierHost {
 public:
  explicit Anchor(Options opts)
      : opts_(std::move(opts)),
        limits_{opts_.memory, opts_.processes, opts_.cpu_quota_us},
        tiers_(anchor::make_tiers(opts_.tier, opts_.best_effort, opts_.fallback, *this)) {}

  int run() {
    if (!begin()) return 0;
    if (!enter_cwd()) return 0;
    if (!contain()) return 0;
    return start();
  }

  // A warm anchor (warm.h): contained first, then the one LAUNCH; what the
  // containment reported (NOCONTAIN) is held until then, after NOCWD.
  int run_warm() {
    if (!begin()) return 0;
    // Waiting, it holds no directory of the host's busy (an unmount); the
    // LAUNCH names the command's.
    if (chdir("/") != 0) trace("chdir /: %s", strerror(errno));
    holding_ = true;
    // What a tier makes of the system's (the cgroup tier's cgroup) is made
    // once the LAUNCH came: a waiting anchor is still in its host's process
    // group, and a kill of that group (a terminal's, a harness's
    // `kill -9 -<pgid>`) would leave it behind, empty, until another
    // anchor's sweep.
    const bool early = tiers_.empty() || tiers_.front()->contains_while_waiting();
    bool contained = early && contain();
    warm::Launch request;
    bool launched = wait_for_launch(request);
    holding_ = false;
    if (launched) launched = take(request);
    if (launched && !early) {
      holding_ = true;  // (what it reports comes after NOCWD, as above)
      contained = contain();
      holding_ = false;
    }
    if (launched) launched = enter_cwd();
    if (!launched) {
      if (contained) tier_->release();
      return 0;
    }
    for (auto& line : held_) send(line);
    if (!contained) return 0;
    first_lines_ = std::move(request.rest);
    return start();
  }

  // ---- TierHost: what the tiers use
  // ---- TierHost: what the tiers use

  void send(const std::string& line) override {
    if (holding_) return held_.push_back(line);
    if (leased()) sent_.push_back(line);  // the replay for an adopter
    if (host_gone_) return;
    write_all(line.data(), line.size());
  }

  bool pidfd() const override { return pidfd_; }

  const protocol::Termination& termination() const override { return term_; }

  // One verified member: the forced kill once forcing, else the polite
  // signal (and SIGCONT) once per process; a failed TERM is retried next round.
  void signal_one(const Member& m) override { signal_pinned(m, -1); }

  void signal_pinned(const Member& m, [[maybe_unused]] int pin) override {  // (pins are Linux's)
    int64_t group = tier_->group();
    // The pin's process is the one listed (PinnedMembers): sent as is.
    auto send_sig = [&](int sig, bool then_cont) {
#if CORDON_LINUX_PROC
      if (pin >= 0) return cordon::signal_pin(pin, sig, then_cont);
#endif
      return then_cont ? cordon::signal_member_then_cont(getpid(), group, m, sig, pidfd_)
                       : cordon::signal_member(getpid(), group, m, sig, pidfd_);
    };
    // After the root's exit, what is signalled is reported as it is now
    // (report_killed): its command line is read before the signal (and only
    // for a signal that is sent: a round walks again, and a member given the
    // polite signal before is not read again).
    auto command = [&]() { return left_listed_ ? cordon::command_line(m.pid) : std::string(); };
    if (term_.forcing()) {
      std::string line = command();
      int rc = send_sig(SIGKILL, false);
      trace("SIGKILL %lld: %d", static_cast<long long>(m.pid), rc);
      if (rc == 0) report_killed(m, line);
      return;
    }
    auto key = std::make_pair(m.pid, m.start_time);
    if (termed_.count(key)) return;
    std::string line = command();
    int rc = send_sig(opts_.polite_signal, true);
    if (rc == 0) termed_.insert(key);
    if (rc == 0) report_killed(m, line);
    trace("signal %d %lld: %d", opts_.polite_signal, static_cast<long long>(m.pid), rc);
  }

  int polite_signal() const override { return opts_.polite_signal; }

  void report_stuck(const std::vector<Member>& left) override {
    term_.stuck_reported();
    send(protocol::stuck(left));
  }

  const std::vector<FileId>& watched() const override { return watched_; }

  const anchor::LimitSpec& limits() const override { return limits_; }

 private:
  bool begin() {
    if (fcntl(kControlFd, F_GETFD) < 0) usage("no control channel on fd 3");
    fcntl(kControlFd, F_SETFD, FD_CLOEXEC);
    watch_host();
    install_signals();
    if (leased()) {
      drain_.adopt_startup_fds();
      int rc = endpoint_.open(opts_.lease_dir, opts_.lease_id);
      if (rc != 0) {
        send(protocol::no_contain(-rc, "lease-endpoint"));
        return false;
      }
    }
    // Probe first, while fds 1 and 2 are still the host's output pipes: on
    // macOS probe() records the identity of our own sockets for list_tree().
    cordon::Probe probe;
    cordon::probe(probe);
    pidfd_ = probe.pidfd;
    return true;
  }

  bool enter_cwd() {
    if (opts_.cwd.empty() || chdir(opts_.cwd.c_str()) == 0) return true;
    send(protocol::no_cwd(errno));
    return false;
  }

  // Contained: the command starts, READY, then the tree is looked after.
  int start() {
    if (opts_.pty_cols > 0 && !open_terminal()) {
      tier_->release();
      return 0;
    }
    watch_output();
    if (!launch()) {
      tier_->release();
      return 0;
    }
    if (relay_.active()) relay_.start();  // (takes fds 0 and 1 first)
    release_stdio();
    if (tier_->group() > 0) send(protocol::group(tier_->group()));
    if (!tier_->marker().empty()) send(protocol::marker(tier_->marker(), tier_->session()));
    std::string limits = tier_->limits_report();
    if (limits.empty() && limits_.any()) limits = protocol::limits(0, 0, 0, "none");
    send(limits);
    send(protocol::ready(root_, tier_->name(), pidfd_, tier_->cgroup_dir()));
    if (!first_lines_.empty()) handle_lines(first_lines_.data(), first_lines_.size());
    loop();
    return 0;
  }

  // A warm anchor waits for its LAUNCH; false if the host went first (its
  // EOF or exit) or SIGTERM came: nothing runs.
  // The LAUNCH, from a host that still has the credentials this anchor was
  // started with (warm::host_credentials_unchanged: checked every 250 ms, and
  // once the LAUNCH is read): one that dropped them since must not run a
  // command with the old ones through it.
  bool wait_for_launch(warm::Launch& request) {
    warm::Receiver receiver;
    const int host = static_cast<int>(getppid());
    auto unchanged = [&]() {
      if (warm::host_credentials_unchanged(host)) return true;
      trace("the host's credentials are not this warm anchor's any more: no command runs");
      return false;
    };
    if (!unchanged()) return false;
    if (!tiers_.empty()) {
      tiers_.front()->while_waiting([]() {
        pollfd p[2] = {{g_signal_pipe[0], POLLIN, 0}, {kControlFd, POLLIN, 0}};
        return poll(p, 2, 0) != 0;
      });
    }
    for (;;) {
      std::vector<pollfd> fds{{g_signal_pipe[0], POLLIN, 0}, {kControlFd, POLLIN, 0}};
      int watch = add_host_watch(fds);
      int rc = poll(fds.data(), static_cast<nfds_t>(fds.size()), 250);
      if (rc < 0 && errno != EINTR) return false;
      if (rc <= 0) {
        if (rc == 0 && !unchanged()) return false;
        continue;
      }
      if (fds[0].revents & POLLIN) read_signals();
      if (sigterm_ || (watch >= 0 && fds[watch].revents)) return false;
      if (fds[1].revents) {
        int got = receiver.feed(kControlFd, request);
        if (got != 0) return got > 0 && unchanged();
      }
    }
  }

  // The LAUNCH's arguments, as a cold anchor's: the same tier, no limits
  // and no lease (the host starts those cold).
  bool take(warm::Launch& request) {
    std::vector<char*> argv{const_cast<char*>("cordon-anchor")};
    for (auto& a : request.args) argv.push_back(&a[0]);
    Options o = anchor::parse_args(static_cast<int>(argv.size()), argv.data());
    if (o.tier != opts_.tier || o.best_effort != opts_.best_effort || o.fallback != opts_.fallback || limits_.any() ||
        o.memory || o.processes || o.cpu_quota_us || o.lease_ms > 0) {
      trace("LAUNCH refused: not this warm anchor's tier, or limits or a lease");
      return false;
    }
    opts_ = std::move(o);
    warm::become(request);
    return true;
  }

  // C1: containment exists before the command's first instruction. The tiers
  // --tier names (with --best-effort or --fallback, more than one) are tried
  // in order; one whose means already failed here is not tried again (the
  // cgroup tier fails as the subreaper tier when it cannot be a subreaper).
  bool contain() {
    int err = 0;
    const char* failed = "";
    for (size_t i = 0; i < tiers_.size(); i++) {
      anchor::Tier& tier = *tiers_[i];
      if (strcmp(failed, tier.name()) == 0) continue;
      int rc = tier.contain(failed);
      if (rc == 0) {
        tier.allow_fallback(i + 1 < tiers_.size());
        tier_ = &tier;
        return true;
      }
      err = -rc;
    }
    send(protocol::no_contain(err, failed));
    return false;
  }

  // --pty: the terminal, before the command exists. Where the anchor leads
  // the tree's session (the process-group tier) it is the anchor's
  // controlling terminal, with the tree's group in the foreground.
  bool open_terminal() {
    int rc = relay_.open(opts_.pty_cols, opts_.pty_rows);
    if (rc == 0 && tier_->anchor_leads_session()) rc = relay_.control_from_anchor(static_cast<pid_t>(tier_->group()));
    if (rc == 0) return true;
    send(protocol::no_contain(-rc, "pty"));
    return false;
  }

  void watch_output() {
    for (int fd : opts_.watch_fds) {
      struct stat sb;
      if (fstat(fd, &sb) != 0) continue;
      if (!S_ISFIFO(sb.st_mode) && !S_ISSOCK(sb.st_mode)) continue;
      watched_.push_back(FileId{static_cast<uint64_t>(sb.st_dev), static_cast<uint64_t>(sb.st_ino)});
    }
  }

  bool launch() {
    std::vector<char*> argv;
    for (auto& a : opts_.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    anchor::CommandChild child;
    child.tier = tier_;
    child.pty = relay_.active() ? &relay_ : nullptr;
    child.close = {kControlFd, g_signal_pipe[0], g_signal_pipe[1]};
    child.uid = opts_.uid;
    child.new_session = opts_.new_session && !relay_.active();
    child.gid = opts_.gid;
    child.path = opts_.path.c_str();
    child.argv = argv.data();
    cordon::confine::Prepared confined;
    if (opts_.confine) {
      if (!prepare_confinement(confined)) return false;
      child.confine = &confined;
    }
    std::string failure;
    pid_t pid = anchor::start_command(child, failure);
    if (opts_.confine) cordon::confine::release(confined);
    if (pid <= 0) {
      send(failure);
      return false;
    }
    root_ = pid;
    trace("root %d started (%s tier)", static_cast<int>(pid), tier_->name());
    return true;
  }

  // --confine: built here, before the fork (Linux: the Landlock ruleset,
  // which allocates and walks directories; macOS: the Seatbelt profile's
  // text), entered by the command's child right before exec.
  bool prepare_confinement(cordon::confine::Prepared& prepared) {
    cordon::confine::Spec spec;
    spec.write = opts_.confine_write;
    spec.deny_read = opts_.confine_deny_read;
    spec.network = opts_.confine_network;
    std::string what;
    int rc = cordon::confine::prepare(spec, prepared, what);
    if (rc != 0) {
      trace("confinement not prepared (%s): %s", what.c_str(), strerror(-rc));
      send(protocol::no_contain(-rc, "confine"));
      return false;
    }
#if CORDON_LINUX_PROC
    trace("confined: landlock ABI %d, network %d", prepared.abi, prepared.network);
#else
    trace("confined: seatbelt profile of %zu bytes, network %d", prepared.profile.size(), prepared.network);
#endif
    return true;
  }

  // The anchor must never hold the command's pipes: closing them is what
  // lets the host see EOF once the tree's own writers are gone.
  void release_stdio() {
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) return;
    for (int fd = 0; fd <= 2; fd++) dup2(devnull, fd);
    if (devnull > 2) close(devnull);
  }

  void install_signals() {
    if (pipe(g_signal_pipe) != 0) _exit(71);
    for (int fd : g_signal_pipe) {
      fcntl(fd, F_SETFD, FD_CLOEXEC);
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    for (int sig : kIgnored) signal(sig, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  }

  void write_all(const char* p, size_t n) {
    while (n > 0 && !host_gone_) {
      ssize_t w = write(control_fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        host_gone_ = true;
        return;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  // Reaps every exited child; returns true when the anchor has no children.
  bool reap() {
    bool root_just_exited = false;
    bool no_children = false;
    bool root_only = tier_->reaps_root_only();
    for (;;) {
      int st = 0;
      if (root_only && root_exited_) break;
      pid_t pid = waitpid(root_only ? root_ : -1, &st, WNOHANG);
      if (pid == 0) break;
      if (pid < 0) {
        if (errno == EINTR) continue;
        no_children = errno == ECHILD;
        break;
      }
      if (pid == root_ && !root_exited_) {
        root_exited_ = true;
        root_exited_at_ = now_ms();
        root_just_exited = true;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        trace("root exited code=%d signal=%d", code, sig);
        send(protocol::exit(code, sig));
        send(tier_->usage_report());
      }
    }
    if (root_only) no_children = root_exited_;
    if (root_just_exited) {
      // A subreaper with no children has no descendants at all (every orphan
      // is reparented to it): the common case needs no /proc scan.
      if (!(no_children && tier_->reaps_all())) {
        for (auto& m : tier_->leftovers()) {
          if (m.command.empty()) m.command = cordon::command_line(m.pid);  // known from a snapshot
          send(protocol::left(m.pid, m.holds_output, m.command));
          left_reported_[std::make_pair(m.pid, m.start_time)] = m.command;
        }
      }
      send(protocol::left_end());
      left_listed_ = true;
    }
    return no_children;
  }

  void start_terminate(int grace_ms) {
    int64_t t = now_ms();
    if (term_.start(grace_ms, t)) terminate_started_ = t;
  }

  // A terminal's tree is asked to stop as a closing terminal does: SIGHUP,
  // then, kHangupAgainMs later if its root still runs, SIGHUP to the root
  // again, as the kernel's hangup of the terminal sends it after the
  // emulator's own. Once is not enough for an interactive shell: bash (5.2,
  // readline 8.2) checks for a caught signal and then waits for input in
  // pselect() with the signal unblocked, so a SIGHUP handled between the two
  // is lost and the shell waits for a key (seen: 1 stop in about 400, on a
  // loaded machine, ended by the grace's SIGKILL). The root is this process's
  // unreaped child: its pid cannot be another process's.
  static constexpr int64_t kHangupAgainMs = 250;
  bool hangup_again_pending() const {
    return relay_.active() && opts_.polite_signal == SIGHUP && !hung_up_again_ && root_ > 0 && !root_exited_ &&
           term_.active() && !term_.forcing();
  }
  void hangup_again(int64_t t) {
    if (!hangup_again_pending() || t - terminate_started_ < kHangupAgainMs) return;
    hung_up_again_ = true;
    int rc = kill(root_, SIGHUP) == 0 ? 0 : -errno;
    trace("SIGHUP to the root %lld again (the terminal's hangup): %d", static_cast<long long>(root_), rc);
  }

  void step_terminate() {
    int64_t t = now_ms();
    if (term_.force_due(t)) {
      trace("grace over: SIGKILL");
      // What the forced stop is about to kill (a tier may kill it all at
      // once: cgroup.kill, a group's SIGKILL), listed and reported first.
      if (left_listed_) {
        for (auto& m : tier_->members(true, false)) report_killed(m, m.command.empty() ? cordon::command_line(m.pid) : m.command);
      }
    }
    tier_->step_terminate(t);
    hangup_again(t);
  }

  // Leftovers are reported as what was killed: the list at the root's exit
  // (LEFT ... LEFTEND), then a LEFT line for each member signalled or about
  // to be force-killed after it that the list lacked (forked since) or that
  // runs another program now (it exec'd since), named as it is when killed.
  // A member whose command line cannot be read (gone, a zombie) is not.
  // A member already named keeps its name when its command line reads as
  // the bracketed short name ("[sleep]"): that is a process on its way out
  // (its memory gone, another signal ending it), not one that exec'd.
  void report_killed(const Member& m, const std::string& command) {
    if (!left_listed_ || command.empty()) return;
    auto key = std::make_pair(m.pid, m.start_time);
    auto it = left_reported_.find(key);
    bool exiting = command.front() == '[' && command.back() == ']';
    if (it != left_reported_.end() && (it->second == command || exiting)) return;
    left_reported_[key] = command;
    send(protocol::left(m.pid, m.holds_output, command));
  }

  void check_released() {
    if (released_sent_ || !root_exited_) return;
    // The terminal: the kernel's word (no process has its slave open).
    bool held = relay_.active() && !relay_.released();
    if (!relay_.active() && !watched_.empty()) {
      for (auto& m : tier_->members(false, true)) {
        if (m.holds_output) {
          held = true;
          break;
        }
      }
    }
    if (!held) {
      released_sent_ = true;
      send(protocol::released());
    }
  }

  // The host's exit is watched as well as its channel's EOF: a copy of the
  // host's end of the channel that leaked to a long-lived process (macOS sets
  // close-on-exec only after the socket pair exists) would hold the EOF off
  // for as long as that process lives. The host is our parent; a watch taken
  // after it died (we were reparented meanwhile) is dropped, the EOF says it.
  void watch_host() {
    pid_t host = getppid();
    int fd = cordon::watch_exit(host);
    if (fd >= 0 && getppid() != host) {
      close(fd);
      fd = -1;
    }
    if (fd < 0) trace("no watch on the host's exit (%s): its channel's EOF alone says it is gone", strerror(-fd));
    host_watch_fd_ = fd;
  }

  // Adds the host's exit watch to a poll set while the host's own channel is
  // attached (host_channel_closed drops the watch: an adopter is seen by its EOF).
  int add_host_watch(std::vector<pollfd>& fds) const {
    if (host_watch_fd_ < 0 || !control_open_) return -1;
    fds.push_back(pollfd{host_watch_fd_, POLLIN, 0});
    return static_cast<int>(fds.size()) - 1;
  }

  // The host exited while its channel was still open: as its EOF.
  void host_exited() {
    if (host_watch_fd_ < 0) return;  // its channel's EOF came first, in the same round
    trace("the host exited while its channel stayed open (a leaked copy): as EOF");
    host_channel_closed();
  }

  // The attached host (or adopter) is gone. The host's exit watch goes with
  // the first close: what attaches later is an adopter, never the host (and
  // its connection may get the host's old descriptor number).
  void host_channel_closed() {
    if (host_watch_fd_ >= 0) {
      close(host_watch_fd_);
      host_watch_fd_ = -1;
    }
    if (leased() && !lease_over_) {
      // The host is gone, under a lease: the tree runs on until a host
      // adopts it or the lease runs out (the full lease, every time).
      close(control_fd_);
      control_fd_ = -1;
      host_gone_ = true;
      detached_ = true;
      control_open_ = false;
      lease_deadline_ = now_ms() + opts_.lease_ms;
      trace("control channel closed: lease of %d ms starts", opts_.lease_ms);
      return;
    }
    // The host is gone (exit, crash, SIGKILL): carry out the teardown alone.
    trace("control channel closed: terminating tree");
    host_gone_ = true;
    control_open_ = false;
    start_terminate(opts_.grace_ms);
  }

  void handle_control() {
    char buf[65536];
    ssize_t n = read(control_fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      host_channel_closed();
      return;
    }
    handle_lines(buf, static_cast<size_t>(n));
  }

  void handle_lines(const char* buf, size_t n) {
    std::vector<std::string> lines;
    control_.feed(buf, n, lines);
    for (auto& line : lines) {
      auto c = protocol::parse_command(line, opts_.grace_ms, false);
      if (c.verb == protocol::Verb::kTerm || c.verb == protocol::Verb::kKill) start_terminate(c.grace_ms);
      if (c.verb == protocol::Verb::kDone && root_exited_) done_ = true;
      if (c.verb == protocol::Verb::kResize) relay_.resize(c.cols, c.rows);
      // The root alone, while it is our unreaped child (its pid pinned: only
      // this loop reaps it); once reaped, nothing is sent.
      if (c.verb == protocol::Verb::kSignal && root_ > 0 && !root_exited_) {
        int rc = kill(root_, c.signal) == 0 ? 0 : -errno;
        trace("signal %d to the root %lld: %d", c.signal, static_cast<long long>(root_), rc);
      }
      if (c.verb == protocol::Verb::kLease && leased() && token_.empty()) {
        token_ = c.arg;
        trace("lease token set (%d ms)", c.grace_ms);
      }
    }
  }

  void loop() {
    for (;;) {
      bool no_children = reap();
      if (relay_.active()) relay_.close_when_delivered();
      if (root_exited_ && no_children && tier_->quiescent()) {
        trace("quiescent");
        // The terminal's last output goes to the host before QUIET (bounded).
        if (relay_.active()) relay_.finish();
        send(tier_->usage_report());  // before the tier lets go of what measures it
        tier_->release();
        // From QUIET on it holds nothing of the command's (its stdio was let
        // go at the start, the terminal just now): nor its working directory,
        // which an unmount or, on some systems, a removal may want, nor (a
        // cold one) the command's arguments and environment in the strings
        // of its exec. Its host does not wait for the exit that follows
        // (lib/anchor/channel.ts, letsGoAtQuiet). A leased one, which may
        // wait on after QUIET, keeps both: its endpoint's path is the host's
        // temporary directory's, which a relative TMPDIR would make relative,
        // and its host waits for its exit.
        if (!leased()) {
          if (chdir("/") != 0) trace("chdir /: %s", strerror(errno));
          overwrite_exec_strings();
        }
        send(protocol::quiescent());
        // Under a lease the result is held until a host has it.
        if (leased() && !lease_over_) hold_result();
        return;
      }
      check_lease();
      if (term_.active()) step_terminate();
      check_released();
      int timeout = -1;
      if (term_.active()) {
        // SIGCHLD wakes the loop at once; the timeout (the tier's) only paces
        // re-walks for members forked meanwhile, and meets the grace deadline.
        timeout = tier_->terminate_wait_ms(now_ms());
        if (hangup_again_pending()) {
          int64_t left = terminate_started_ + kHangupAgainMs - now_ms();
          if (left < 0) left = 0;
          if (timeout < 0 || left < timeout) timeout = static_cast<int>(left);
        }
      } else if (root_exited_ && !released_sent_) {
        timeout = tier_->held_output_wait_ms(now_ms() - root_exited_at_);
      } else {
        // Orphans of a kept tree are reparented to us and reaped on SIGCHLD;
        // a slow poll covers grandchildren whose parents reap them.
        timeout = tier_->idle_wait_ms(root_exited_);
      }
      if (!term_.active()) tier_->idle_tick(now_ms());
      timeout = lease_wait(timeout);
      std::vector<pollfd> fds;
      fds.push_back(pollfd{g_signal_pipe[0], POLLIN, 0});
      int control = control_open_ ? static_cast<int>(fds.size()) : -1;
      if (control_open_) fds.push_back(pollfd{control_fd_, POLLIN, 0});
      int event = tier_->event_fd() >= 0 ? static_cast<int>(fds.size()) : -1;
      if (event >= 0) fds.push_back(pollfd{tier_->event_fd(), POLLPRI, 0});
      int watch = add_host_watch(fds);
      for (int fd : tier_->wake_fds()) fds.push_back(pollfd{fd, POLLIN, 0});  // (only to wake)
      size_t relay_from = fds.size();
      relay_.add_pollfds(fds);
      size_t lease_from = fds.size();
      add_lease_pollfds(fds);
      int rc = poll(fds.data(), static_cast<nfds_t>(fds.size()), timeout);
      if (rc < 0 && errno != EINTR) {
        trace("poll: %s", strerror(errno));
        return;
      }
      if (rc <= 0) continue;
      if (fds[0].revents & POLLIN) read_signals();
      if (control >= 0 && (fds[control].revents & (POLLIN | POLLHUP | POLLERR))) handle_control();
      if (watch >= 0 && fds[watch].revents) host_exited();
      if (event >= 0 && fds[event].revents) tier_->handle_event();
      if (relay_.active()) {
        relay_.handle(std::vector<pollfd>(fds.begin() + static_cast<long>(relay_from), fds.begin() + static_cast<long>(lease_from)));
      }
      handle_lease(std::vector<pollfd>(fds.begin() + static_cast<long>(lease_from), fds.end()));
    }
  }

  void read_signals() {
    unsigned char sigs[64];
    ssize_t k;
    while ((k = read(g_signal_pipe[0], sigs, sizeof sigs)) > 0) {
      for (ssize_t i = 0; i < k; i++) {
        if (sigs[i] == SIGTERM) {
          start_terminate(opts_.grace_ms);
          sigterm_ = true;
        }
      }
    }
  }

  // ---- the lease

  bool leased() const { return opts_.lease_ms > 0; }

  // Detached past the lease: the teardown, as for EOF without a lease; no
  // adoption from here on.
  void check_lease() {
    if (!leased() || !detached_ || lease_over_ || now_ms() < lease_deadline_) return;
    trace("lease over: terminating tree");
    lease_over_ = true;
    endpoint_.remove();
    start_terminate(opts_.grace_ms);
  }

  // The loop's sleep, shortened to the lease's end while detached.
  int lease_wait(int timeout) const {
    if (!leased() || !detached_ || lease_over_) return timeout;
    int64_t left = lease_deadline_ - now_ms();
    int lease_ms = static_cast<int>(left < 0 ? 0 : (left > 60000 ? 60000 : left));
    return timeout < 0 || lease_ms < timeout ? lease_ms : timeout;
  }

  void add_lease_pollfds(std::vector<pollfd>& fds) const {
    if (!leased()) return;
    endpoint_.add_pollfds(fds);
    if (detached_) drain_.add_pollfds(fds);  // never while a host reads them
  }

  void handle_lease(const std::vector<pollfd>& fds) {
    if (!leased()) return;
    if (detached_) drain_.handle(fds);
    for (auto& r : endpoint_.handle(fds)) answer(r.fd, r.line);
  }

  // One request on the endpoint: INFO, or ADOPT (exactly one host at a time).
  void answer(int fd, const std::string& line) {
    auto c = protocol::parse_command(line, opts_.grace_ms, false);
    if (c.verb == protocol::Verb::kInfo) {
      int64_t left = detached_ ? lease_deadline_ - now_ms() : -1;
      send_line(fd, protocol::lease_info(detached_ && left < 0 ? 0 : left, !root_exited_), {});
      close(fd);
      return;
    }
    if (c.verb != protocol::Verb::kAdopt) {
      close(fd);
      return;
    }
    const char* why = nullptr;
    if (token_.empty()) why = "notoken";
    else if (!protocol::same_token(c.arg, token_)) why = "token";
    else if (!detached_) why = "attached";
    else if (lease_over_) why = "expired";
    if (why) {
      trace("adoption refused: %s", why);
      send_line(fd, protocol::denied(why), {});
      close(fd);
      return;
    }
    std::string log = log_path();
    std::vector<int> pass = drain_.open_outputs();
    // A terminal's input from the adopter: a pipe of its own, the old one
    // (the gone host's) replaced once the adopter has its end.
    int input[2] = {-1, -1};
    if (relay_.active() && !relay_.released() && make_pipe(input)) pass.push_back(input[1]);
    bool sent = send_line(fd, protocol::adopted(log, drain_.has_stdout(), drain_.has_stderr(), input[1] >= 0), pass);
    if (input[1] >= 0) close(input[1]);
    if (!sent) {
      if (input[0] >= 0) close(input[0]);
      close(fd);
      return;
    }
    if (input[0] >= 0) relay_.replace_input(input[0]);
    trace("adopted");
    control_fd_ = fd;
    detached_ = false;
    host_gone_ = false;
    control_open_ = true;
    control_ = protocol::LineReader(false);
    for (auto& l : sent_) write_all(l.data(), l.size());
  }

  static bool make_pipe(int fds[2]) {
    if (pipe(fds) != 0) return false;
    for (int i = 0; i < 2; i++) fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    return true;
  }

  // The log's path as the kernel names the descriptor (Linux), else empty:
  // the host's <id>.json has it too.
  std::string log_path() const {
#ifdef __linux__
    char buf[4096];
    ssize_t n = readlink("/proc/self/fd/6", buf, sizeof buf - 1);
    if (n > 0 && buf[0] == '/') return std::string(buf, static_cast<size_t>(n));
#endif
    return std::string();
  }

  // Quiescent under a lease: the result (the replay, QUIET last) is held
  // until a host says DONE, which it does once it has read QUIET. A host that
  // dies before that (its EOF) leaves it to an adopter, as does one that was
  // gone already: the lease clock runs while none is attached, and its end,
  // or SIGTERM, ends the wait.
  void hold_result() {
    trace(detached_ ? "quiescent while detached: waiting for an adopter" : "quiescent: holding the result until the host has it");
    while (!done_ && !sigterm_) {
      if (detached_ && now_ms() >= lease_deadline_) {
        trace("lease over while quiescent");
        return;
      }
      std::vector<pollfd> fds;
      fds.push_back(pollfd{g_signal_pipe[0], POLLIN, 0});
      int control = control_open_ ? static_cast<int>(fds.size()) : -1;
      if (control_open_) fds.push_back(pollfd{control_fd_, POLLIN, 0});
      int watch = add_host_watch(fds);
      size_t lease_from = fds.size();
      add_lease_pollfds(fds);
      int rc = poll(fds.data(), static_cast<nfds_t>(fds.size()), lease_wait(-1));
      if (rc < 0 && errno != EINTR) return;
      if (rc <= 0) continue;
      if (fds[0].revents & POLLIN) read_signals();
      if (control >= 0 && (fds[control].revents & (POLLIN | POLLHUP | POLLERR))) handle_control();
      if (watch >= 0 && fds[watch].revents) host_exited();
      handle_lease(std::vector<pollfd>(fds.begin() + static_cast<long>(lease_from), fds.end()));
    }
    if (done_) trace("the host has the result");
  }

  Options opts_;
  anchor::LimitSpec limits_;
  std::vector<std::unique_ptr<anchor::Tier>> tiers_;  // the tier and its fallbacks, in order
  anchor::Tier* tier_ = nullptr;                      // the one that contains the tree
  pid_t root_ = -1;
  bool pidfd_ = false;
  bool root_exited_ = false;
  protocol::Termination term_;
  bool released_sent_ = false;
  bool host_gone_ = false;
  bool control_open_ = true;
  int control_fd_ = kControlFd;  // the host's, or an adopter's connection
  int host_watch_fd_ = -1;       // readable once the host (our parent) has exited (watch_host)
  // The lease (--lease): its endpoint, the token LEASE set, the output drain
  // while detached, when the clock runs out, every line sent (the replay).
  anchor::Endpoint endpoint_;
  anchor::Drain drain_;
  anchor::PtyRelay relay_;  // --pty: the terminal
  std::string token_;
  int64_t lease_deadline_ = 0;
  bool lease_over_ = false;
  bool sigterm_ = false;
  bool detached_ = false;  // the host's EOF came under a lease: no host attached
  bool done_ = false;      // the host said DONE: it has the result
  std::vector<std::string> sent_;
  int64_t root_exited_at_ = 0;
  int64_t terminate_started_ = 0;  // when the stop began (start_terminate)
  bool hung_up_again_ = false;     // hangup_again: sent
  std::vector<FileId> watched_;
  // Members signal_one has given the polite signal.
  std::set<std::pair<int64_t, uint64_t>> termed_;
  // The leftovers reported (LEFT), by identity, with the command line given;
  // left_listed_ once the root-exit list ended (LEFTEND).
  std::map<std::pair<int64_t, uint64_t>, std::string> left_reported_;
  bool left_listed_ = false;
  protocol::LineReader control_{false};
  // A warm anchor: lines sent before its LAUNCH (held), the control lines that came with it.
  bool holding_ = false;
  std::vector<std::string> held_;
  std::string first_lines_;
};

}  // namespace

int main(int argc, char** argv) {
  // Only fds 0-3 are the anchor's: whatever the host leaked without
  // close-on-exec must not be held for the life of the tree.
  // Under a lease fds 4-6 are the anchor's too (lease.h).
  bool leased = false;
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) leased = leased || strcmp(argv[i], "--lease-dir") == 0;
  cordon::close_fds_from(leased ? 7 : 4, -1);
#if CORDON_LINUX_PROC
  cordon::skip_older_processes();  // no member of the tree is older than the anchor
#endif
  note_exec_strings(argc, argv);
  if (argc > 1 && strcmp(argv[1], "--warm") == 0) {
    Anchor anchor(anchor::parse_warm_args(argc, argv));
    return anchor.run_warm();
  }
  Options opts = anchor::parse_args(argc, argv);
  Anchor anchor(std::move(opts));
  return anchor.run();
}
