// cordon-anchor.exe: the per-tree anchor process (Windows).
//
// It speaks the same protocol as the POSIX anchor (native/protocol.h), so
// lib/anchor/ (posix.ts, windows.ts) drives both alike. The host starts it
// with the command's stdio on its standard handles and the control channel at
// CRT fds 3 (out) and 4 (in); it readies the tree's Job Object before the
// command exists (C1), holds the tree's identity (the job, and the root's
// handle) for as long as anything may signal it, carries out the teardown by
// itself, and terminates the tree when the host goes away (control EOF),
// unless a lease holds it.
//
// This file: the command line and main(). The anchor's concerns, one file
// each, are listed in anchor.h: the control loop and the termination schedule
// (control.cc) over the control channel (channel.h), the job (job.h),
// starting the command (launch.h), RELEASED (released.h), the lease endpoint
// (lease.h) and a leased tree's output relay (relay.h).
#include "anchor.h"

#include <shellapi.h>

#include <cstdio>
#include <utility>
#include <vector>

namespace cordon {
namespace anchor {

void usage(const char* why) {
  protocol::print_usage(why,
                        "cordon-anchor.exe [--tier job-object] [--job-from-host] [--best-effort] [--grace MS]\n"
                        "       [--memory BYTES] [--max-processes N] [--cpu-quota US]\n"
                        "       [--cmd-shell] [--hide-window] [--watch-fd N]... [--lease MS --lease-id HEX16] [--pty COLS ROWS] [--trace FILE]\n"
                        "       -- PATH ARGV0 [ARGS...]\n"
                        "   or: cordon-anchor.exe --warm --job-from-host [--tier job-object] [--best-effort] [--trace FILE]",
                        "at fds 3 (out) and 4 (in)");
  ExitProcess(protocol::kUsageExit);
}

namespace {

void open_trace(const wchar_t* file) { protocol::set_trace(_wfopen(file, L"a"), GetCurrentProcessId()); }

void no_trace(const wchar_t*) {}

}  // namespace

Options parse_args(int argc, wchar_t** argv, bool warm_launch) {
  Options o;
  o.tier = "job-object";
  const unsigned extra = protocol::kJobFromHostOption | protocol::kCwdOption | protocol::kCmdShellOption |
                         protocol::kLimitOptions | protocol::kLeaseOptions | protocol::kLogOption |
                         protocol::kHideWindowOption | protocol::kPtyOption;
  // (A LAUNCH's --trace names the file the warm anchor already writes.)
  protocol::parse_options(argc, argv, extra, o, usage, warm_launch ? no_trace : open_trace);
  if (o.tier != "job-object") usage("unknown tier");
  if ((o.lease_ms > 0) != !o.lease_id.empty()) usage("--lease and --lease-id go together");
  return o;
}

namespace {

// `warm`: started with --warm (warm.h), which takes only --job-from-host,
// --tier, --best-effort and --trace; the command comes with the LAUNCH.
Options parse(bool& warm) {
  int argc = 0;
  LPWSTR* argv = CommandLineToArgvW(GetCommandLineW(), &argc);
  if (!argv) usage("cannot parse the command line");
  warm = argc > 1 && wcscmp(argv[1], L"--warm") == 0;
  Options o;
  if (warm) {
    static wchar_t separator[] = L"--", none[] = L"-";
    std::vector<wchar_t*> args{argv[0]};
    for (int i = 2; i < argc; i++) {
      bool valued = wcscmp(argv[i], L"--tier") == 0 || wcscmp(argv[i], L"--trace") == 0;
      if (!valued && wcscmp(argv[i], L"--job-from-host") != 0 && wcscmp(argv[i], L"--best-effort") != 0) {
        usage("--warm takes only --job-from-host, --tier, --best-effort and --trace");
      }
      args.push_back(argv[i]);
      if (valued && i + 1 < argc) args.push_back(argv[++i]);
    }
    for (wchar_t* a : {separator, none, none}) args.push_back(a);
    o = parse_args(static_cast<int>(args.size()), args.data(), false);
    if (!o.job_from_host) usage("--warm goes with --job-from-host");
  } else {
    o = parse_args(argc, argv, false);
  }
  LocalFree(argv);
  return o;
}

}  // namespace

}  // namespace anchor
}  // namespace cordon

int main() {
  bool warm = false;
  cordon::anchor::Options opts = cordon::anchor::parse(warm);
  return cordon::anchor::run(std::move(opts), warm);
}
