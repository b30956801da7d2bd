// A warm anchor (Windows): an anchor the host starts ahead of need
// (`cordon-anchor.exe --warm --job-from-host --tier job-object
// [--best-effort] [--trace FILE]`, stdio NUL, the control channel at fds 3
// and 4). The host creates the tree's Job Object as it starts it and sends
// `JOB <handle>` at once, as to a cold anchor; then the anchor waits for its
// one LAUNCH, which carries what a cold anchor gets when it is started: its
// arguments (the same list, `-- PATH ARGV0 ...` included), the command's
// environment (the anchor's own from then on, as a cold anchor's is the
// command's), and the command's stdio as three handles the host duplicated
// into this process (inheritable). From there it runs exactly as a cold
// anchor (open the job, create suspended, assign, resume, READY). It is used
// once. It exits running nothing when the host closes the channel (retired:
// idle, the host's identity changed, the host exited or died) or when what
// came is not a well-formed LAUNCH.
//
// The message, after the JOB line and before anything else:
//   LAUNCH <argc> <envc> <bytes> <stdin> <stdout> <stderr>\n<bytes>
// <bytes>: argc + envc UTF-8 strings, each ended by a NUL (the arguments
// first, then NAME=value entries); each number in decimal without a sign or
// leading zeros; <stdin> <stdout> <stderr>: handle values in this process, 0
// for none. Anything else before the LAUNCH, a header that is not exactly
// this, a body whose strings do not count up, an environment entry without
// a name, a handle that is not an open file, pipe or character device of
// this process (or is its control channel): refused, nothing runs.
#pragma once

#include "anchor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cordon {
namespace anchor {
namespace warm {

// The most a LAUNCH may carry (the host starts a cold anchor above it).
constexpr size_t kMaxLaunchBytes = 192 * 1024;

struct Launch {
  std::vector<std::string> args;  // the anchor's arguments, without argv[0]
  std::vector<std::string> env;   // "NAME=value"
  uint64_t handles[3] = {0, 0, 0};
  std::string rest;  // what followed it: the first control lines
};

// Reads what comes on the control channel until the LAUNCH is complete.
class Reader {
 public:
  enum Result { kMore, kLine, kLaunch, kBad };
  void feed(const char* data, size_t n) { buf_.append(data, n); }
  // kLine: a control line before the LAUNCH (without its newline) in `line`;
  // kLaunch: the LAUNCH, in `out`; kMore: nothing complete yet; kBad: not a
  // LAUNCH (the reason traced).
  Result next(std::string& line, Launch& out);

 private:
  std::string buf_;
};

// The host as a warm anchor knows it: its parent, the process that started
// it (checked older than the anchor, so not another one on a reused pid).
// A host whose token (win::token_identity: user, groups, privileges,
// integrity level, session) is no longer the anchor's own, or whose priority
// class changed since the anchor started, is not the host that started it:
// a cold anchor started now would get the new ones, so this one must not run
// a command for it. The anchor checks every kHostCheckMs while it waits and
// once the LAUNCH is read, and exits running nothing when they differ (the
// host's side keys its pool on the same, lib/anchor/windows-warm.ts).
constexpr int kHostCheckMs = 250;
class HostWatch {
 public:
  ~HostWatch();
  // Finds and opens the host, notes the anchor's own token (a copy of the
  // host's when it was created) and the host's priority class then (the
  // host puts it in CORDON_WARM_HOST_PRIORITY_CLASS: read from the host here,
  // it could be one the host took since). false (traced): it cannot.
  bool open();
  // Whether the host is still as open() found it; false where it cannot be read.
  bool unchanged();

 private:
  HANDLE host_ = nullptr;
  DWORD priority_ = 0;
  std::string own_;
};

// The anchor takes the LAUNCH: its standard handles become the command's
// stdio (its own NUL handles closed) and its environment the command's.
// `channel`: the anchor's own ends of the control channel, which no stdio
// handle may be. false: refused (traced); the anchor then exits.
bool become(const Launch& launch, const HANDLE channel[2]);

}  // namespace warm
}  // namespace anchor
}  // namespace cordon
