// Confinement of a tree on macOS: a Seatbelt profile (SBPL) built from the
// `confine` option (lib/confine.ts; docs/confine.md, "macOS") and applied
// with sandbox_init(3) in the command's own process right before exec. The
// same interface as the Linux side (native/linux/confine.h): prepare() in
// the anchor before the fork, enter() in the child, release() in the anchor
// once the child has exec'd or failed.
//
// sandbox(7): "New processes inherit the sandbox of their parent", and no
// call removes or replaces it (Apple's DTS on the developer forums, thread
// 747880: a child cannot be given another profile than its parent's). So
// every descendant of the command, across fork and exec, keeps it. The
// anchor itself is never sandboxed: it still signals, reaps and kills.
//
// On the model of XNU (test/xnu-model, CORDON_XNU_MODEL) the same code runs
// on Linux and the model's sandbox_init records the profile it is given
// instead of enforcing it (docs/xnu-model.md): Seatbelt is not open source.
#pragma once

#include <string>
#include <vector>

namespace cordon {
namespace confine {

enum Network : int { kNetworkAll = 0, kNetworkNone = 1, kNetworkLoopback = 2 };

struct Spec {
  std::vector<std::string> write;      // may be written (and read) below; absolute, canonical
  std::vector<std::string> deny_read;  // may not be read (nor written, nor exec'd) below; absolute, canonical
  int network = kNetworkAll;
};

struct Prepared {
  std::string profile;  // the SBPL text sandbox_init() is given
  int network = kNetworkAll;
};

// The profile for `spec`, in `out`. 0, or -EINVAL with `what` the path that
// cannot be written into a profile (a control character: see confine.cc).
int profile(const Spec& spec, std::string& out, std::string& what);

// In the anchor: the profile for `spec`. 0, or a negative errno with `what`
// naming the path.
int prepare(const Spec& spec, Prepared& out, std::string& what);

// In the child, right before exec: sandbox_init() with the prepared profile.
// 0, or an errno (sandbox_init's errno, EINVAL where it set none: a profile
// macOS did not accept). It allocates (libsandbox compiles the profile): the
// child must be a plain fork of a single-threaded process (command_child.cc).
int enter(const Prepared& p);

// In the anchor, once the child has exec'd or failed: what prepare() kept.
void release(Prepared& p);

}  // namespace confine
}  // namespace cordon
