// Confinement of a tree by the kernel (Linux): Landlock for the filesystem
// and TCP, a network namespace of the tree's own for the network. What the
// `confine` option asks for (lib/confine.ts; docs/confine.md).
//
// Built in two halves, because the command's side of the anchor's fork may
// share the anchor's memory (native/linux/clone.cc): prepare() runs in the
// anchor before the fork and does everything that allocates or walks
// directories (the ruleset, each rule's O_PATH descriptor); enter() runs in
// the child right before exec and makes plain system calls only (unshare,
// socket, ioctl, prctl, landlock_restrict_self, close): no allocation, no
// stdio, no write to memory the anchor uses.
//
// macOS has the same interface over a Seatbelt profile: native/darwin/confine.h.
#pragma once

#include <string>
#include <vector>

namespace cordon {
namespace confine {

// The newest Landlock ABI this kernel has (1..), or 0: none (Landlock not
// built in, or not enabled at boot: lsm=).
int landlock_abi();

enum Network : int { kNetworkAll = 0, kNetworkNone = 1, kNetworkLoopback = 2 };

struct Spec {
  std::vector<std::string> write;      // may be written (and read) below
  std::vector<std::string> deny_read;  // may not be read (nor written) below; absolute, canonical
  int network = kNetworkAll;
};

struct Prepared {
  int ruleset_fd = -1;  // close-on-exec; the anchor closes it once the child has exec'd
  int network = kNetworkAll;
  int abi = 0;
};

// In the anchor: the ruleset for `spec` at the best ABI this kernel has.
// 0, or a negative errno with `what` naming the step (a path, or
// "landlock" where the kernel has none).
int prepare(const Spec& spec, Prepared& out, std::string& what);

// In the child, right before exec: the tree's own network namespace
// (kNetworkNone: no interface up; kNetworkLoopback: `lo` up), then
// no_new_privs and the Landlock domain, which every descendant inherits and
// none can leave. 0, or an errno. Async-signal-safe.
int enter(const Prepared& p);

// In the anchor, once the child has exec'd or failed: the ruleset closed.
void release(Prepared& p);

}  // namespace confine
}  // namespace cordon
