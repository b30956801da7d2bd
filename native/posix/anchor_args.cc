// The anchor's command line (anchor_args.h).
#include "anchor_args.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "tier.h"

namespace cordon {
namespace anchor {

[[noreturn]] void usage(const char* why) {
  protocol::print_usage(why,
                        "cordon-anchor [--tier " + anchor::tier_names() +
                            "] [--best-effort] [--fallback] [--grace MS] [--memory BYTES] [--max-processes N] [--cpu-quota US] "
                            "[--polite-signal N] [--uid N] [--gid N] [--watch-fd N]... [--cwd DIR] [--trace FILE] "
                            "[--lease MS --lease-id ID --lease-dir DIR] [--pty COLS ROWS] "
                            "[--confine [--confine-write DIR]... [--confine-deny-read DIR]... [--confine-network none|loopback|all]] [--new-session] "
                            "-- PATH ARGV0 [ARGS...]",
                        "on fd 3");
  _exit(protocol::kUsageExit);
}

namespace {

void open_trace(const char* file) {
  static bool opened = false;  // (a warm anchor's LAUNCH may name it again)
  if (opened) return;
  opened = true;
  FILE* f = fopen(file, "a");
  if (f) fcntl(fileno(f), F_SETFD, FD_CLOEXEC);
  protocol::set_trace(f, static_cast<unsigned long>(getpid()));
}

}  // namespace

Options parse_args(int argc, char** argv) {
  Options o;
  o.tier = "subreaper";
  protocol::parse_options(argc, argv,
                          protocol::kCwdOption | protocol::kFallbackOption | protocol::kLimitOptions |
                              protocol::kPoliteSignalOption | protocol::kCredentialsOption | protocol::kLeaseOptions |
                              protocol::kLeaseDirOption | protocol::kPtyOption | protocol::kConfineOptions |
                              protocol::kNewSessionOption,
                          o, usage, open_trace);
  if (!anchor::is_tier(o.tier)) usage("unknown tier");
  if (!o.confine && (!o.confine_write.empty() || !o.confine_deny_read.empty() || o.confine_network != 0)) {
    usage("--confine-write, --confine-deny-read and --confine-network go with --confine");
  }
  for (const auto* list : {&o.confine_write, &o.confine_deny_read}) {
    for (const auto& p : *list) {
      if (p.empty() || p[0] != '/') usage("--confine-write and --confine-deny-read take absolute paths");
    }
  }
  if ((o.lease_ms > 0) != !o.lease_dir.empty() || (o.lease_ms > 0) != !o.lease_id.empty()) {
    usage("--lease, --lease-id and --lease-dir go together");
  }
  // A polite signal must be one that asks: never one that cannot be caught
  // (SIGKILL is the forced kill's, SIGSTOP would freeze the tree) or SIGCONT.
  if (o.polite_signal == 0) o.polite_signal = SIGTERM;
  if (o.polite_signal >= NSIG || o.polite_signal == SIGKILL || o.polite_signal == SIGSTOP || o.polite_signal == SIGCONT) {
    usage("--polite-signal takes a catchable signal number other than SIGCONT");
  }
  return o;
}

Options parse_warm_args(int argc, char** argv) {
  static char separator[] = "--", none[] = "-";
  std::vector<char*> args{argv[0]};
  for (int i = 2; i < argc; i++) {
    bool valued = strcmp(argv[i], "--tier") == 0 || strcmp(argv[i], "--trace") == 0;
    if (!valued && strcmp(argv[i], "--fallback") != 0 && strcmp(argv[i], "--best-effort") != 0) {
      usage("--warm takes only --tier, --fallback, --best-effort and --trace");
    }
    args.push_back(argv[i]);
    if (valued && i + 1 < argc) args.push_back(argv[++i]);
  }
  for (char* a : {separator, none, none}) args.push_back(a);
  return parse_args(static_cast<int>(args.size()), args.data());
}

}  // namespace anchor
}  // namespace cordon
