// The command's side of the anchor's fork (anchor.cc's launch): what runs in
// the child between fork and exec. Nothing of the command runs until the
// tier's steps, the terminal's and the privilege drop have all succeeded;
// a failed step is written to the status pipe as [stage, errno] and the child
// exits 127.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "../cordon.h"  // CORDON_LINUX_PROC
#include "pty_relay.h"
#include "tier.h"
#if CORDON_LINUX_PROC
#include "../linux/confine.h"
#else
#include "../darwin/confine.h"  // macOS, and the model of XNU
#endif

namespace cordon {
namespace anchor {

// The stages a failure is reported at.
enum ChildStage : int {
  kStageExec = 0,     // EXECFAIL <errno>
  kStageTier = 1,     // NOCONTAIN <errno> <tier>: joining the tree's process group
  kStageSetuid = 2,   // NOCONTAIN <errno> setuid: --uid/--gid
  kStageTerminal = 3, // NOCONTAIN <errno> pty: the terminal as stdio (and controlling terminal)
  kStageConfine = 4,  // NOCONTAIN <errno> confine: --confine (Linux: a network namespace, the Landlock domain; macOS: the Seatbelt profile)
};

struct CommandChild {
  Tier* tier = nullptr;
  PtyRelay* pty = nullptr;  // with --pty; its own session unless the anchor leads it
  int status_fd = -1;       // the write end of the status pipe (close-on-exec)
  std::vector<int> close;   // the anchor's own descriptors, closed before anything else
  int uid = -1;
  int gid = -1;
  // --new-session: setsid() before exec (not where the tier groups the tree
  // itself, nor with a terminal, whose session the command leads already).
  bool new_session = false;
  // --confine: what the anchor prepared (native/linux/confine.h,
  // native/darwin/confine.h), entered right before exec; null: not confined.
  const confine::Prepared* confine = nullptr;
  const char* path = nullptr;
  char** argv = nullptr;
};

// In the child: never returns.
[[noreturn]] void exec_command(const CommandChild& c);

// Forks the command (through the tier) and waits for its exec: its pid, or
// 0 with `failure` the line to report (NOCONTAIN, EXECFAIL), nothing of it
// left running. `child.status_fd` is made here.
pid_t start_command(CommandChild child, std::string& failure);

}  // namespace anchor
}  // namespace cordon
