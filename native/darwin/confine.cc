// Confinement of a tree on macOS: see confine.h.
//
// What the profile says, rule by rule, and where each rule's meaning was
// read (Seatbelt's language, SBPL, has no public specification: Apple's
// sandbox_init(3) calls the profile format undocumented, and its DTS says
// custom profiles are unsupported, developer forums thread 747880). Read, not
// copied: OpenAI Codex CLI's profiles (codex-rs/core/src/seatbelt_*.sbpl),
// Anthropic's sandbox-runtime (src/sandbox/macos-sandbox-utils.ts), which
// both run on current macOS, the Chromium profiles they cite
// (sandbox/policy/mac/common.sb), and the reverse-engineered "Apple Sandbox
// Guide" v1.0 (reverse.put.as, 2011). Every operation and filter named below
// appears in the Codex or sandbox-runtime profiles; none of it was run on a
// Mac by this project (docs/confine.md, "macOS").
//
//   (version 1)                 the only SBPL version there is.
//   (allow default)             what no rule below names is left as it is
//                               without a sandbox: reading and executing,
//                               Mach and XPC services, signals, sysctl. The
//                               same scope as the Linux side (Landlock grants
//                               read and execute everywhere but denyRead).
//   (deny file-write*)          every write (create, write data, unlink,
//                               rename, link, set attributes, ...): file-write*
//                               is the family of all file-write-* operations.
//   (allow file-write* (subpath W))
//                               writes below each write path, the tree's own
//                               temp dir among them. SBPL applies the last
//                               rule that matches an operation (sandbox-
//                               runtime: "later rules take precedence"; the
//                               Codex and Chromium profiles open holes after
//                               a deny the same way), so these holes come
//                               after the deny. One rule per path: an allow
//                               with no filter would allow every write.
//   (allow file-write* (literal "/dev/null") ...)
//                               the devices a program writes to: /dev/null,
//                               /dev/zero, /dev/random, /dev/urandom, /dev/tty,
//                               /dev/ptmx and a terminal (/dev/ttysN: a pty
//                               tree's, the host's, one the tree opens with
//                               openpty), /dev/dtracehelper (what the dynamic
//                               linker opens where DTrace probes exist),
//                               /dev/fd/N (a shell's >/dev/stdout). The Codex
//                               and sandbox-runtime profiles allow these; the
//                               Linux side allows the same devices but
//                               /dev/full (none on macOS) and dtracehelper.
//   (deny file-read* process-exec (subpath D))
//                               no read (data, metadata, extended attributes)
//                               and no exec below each denyRead path; last, so
//                               it overrides the allow default. (Writes there
//                               are denied already: lib/confine.ts refuses a
//                               denyRead path below a write path and the other
//                               way round, so no write hole covers one, nor
//                               an ancestor a rename could move it by.)
//   network 'none':     (deny network*)
//                               no bind, connect, send or receive on any
//                               socket, Unix-domain ones bound to a path
//                               included (sandbox-runtime blocks those the
//                               same way unless it allows a socket path).
//                               socketpair() and inherited sockets have no
//                               address to check and keep working.
//   network 'loopback': (deny network*), then
//                       (allow network-bind network-inbound (local ip "localhost:*"))
//                       (allow network-outbound (remote ip "localhost:*"))
//                               IP to and from the loopback addresses only
//                               (Codex's local network policy). Unlike Linux,
//                               where the tree has a loopback of its own, the
//                               host's loopback listeners are reachable.
//   network 'all':      nothing.
//
// Inherited: a fork's child takes its parent's credential and MAC label
// (xnu-11417.101.15 bsd/kern/kern_fork.c:1061, :342
// mac_cred_label_associate_fork), an exec lets the policies transition the
// label (bsd/kern/kern_exec.c:7002); that the Sandbox keeps it there is
// sandbox(7)'s word (Sandbox.kext is not open source).
//
// Paths are matched as the kernel resolved them (the vnode's path): /tmp is
// /private/tmp, /var is /private/var. lib/confine.ts passes canonical paths
// (realpath), and the tree's temp dir is realpath'd too.
//
// A path is written into the profile as an SBPL (Scheme) string literal:
// between double quotes, with `"` and `\` escaped by a backslash, so no path
// can end its string early or add a rule. A path with a control character
// (a newline, ...) is refused (EINVAL): how the profile reader takes one inside
// a string was not found in anything read.
#include "confine.h"

#include <errno.h>
#include <stdint.h>

#include <cstddef>

// libsystem_sandbox, re-exported by libSystem (zig's libSystem.tbd lists
// both for x86_64 and arm64 macOS). <sandbox.h> is not in every SDK cordon
// builds against (zig's has none): declared here as sandbox_init(3) gives it.
extern "C" int sandbox_init(const char* profile, uint64_t flags, char** errorbuf);
extern "C" void sandbox_free_error(char* errorbuf);

namespace cordon {
namespace confine {

namespace {

// `path` as an SBPL string literal appended to `out`; false where it holds a
// control character.
bool append_string(const std::string& path, std::string& out) {
  std::string quoted = "\"";
  for (char ch : path) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += ch;
  }
  quoted += '"';
  out += quoted;
  return true;
}

const char* const kDeviceRules =
    "(allow file-write*\n"
    "  (literal \"/dev/null\")\n"
    "  (literal \"/dev/zero\")\n"
    "  (literal \"/dev/random\")\n"
    "  (literal \"/dev/urandom\")\n"
    "  (literal \"/dev/tty\")\n"
    "  (literal \"/dev/ptmx\")\n"
    "  (literal \"/dev/dtracehelper\")\n"
    "  (regex #\"^/dev/ttys[0-9]+$\")\n"
    "  (subpath \"/dev/fd\"))\n";

// One rule `(<head> (subpath "<path>"))` per path; false (with `what` the
// path) where one cannot be written as a string literal.
bool subpath_rules(const char* head, const std::vector<std::string>& paths, std::string& out, std::string& what) {
  for (const auto& path : paths) {
    out += "(";
    out += head;
    out += " (subpath ";
    if (!append_string(path, out)) {
      what = path;
      return false;
    }
    out += "))\n";
  }
  return true;
}

}  // namespace

int profile(const Spec& spec, std::string& out, std::string& what) {
  out = "(version 1)\n(allow default)\n(deny file-write*)\n";
  if (!subpath_rules("allow file-write*", spec.write, out, what)) return -EINVAL;
  out += kDeviceRules;
  if (!subpath_rules("deny file-read* process-exec", spec.deny_read, out, what)) return -EINVAL;
  if (spec.network == kNetworkNone || spec.network == kNetworkLoopback) out += "(deny network*)\n";
  if (spec.network == kNetworkLoopback) {
    out += "(allow network-bind network-inbound (local ip \"localhost:*\"))\n";
    out += "(allow network-outbound (remote ip \"localhost:*\"))\n";
  }
  return 0;
}

int prepare(const Spec& spec, Prepared& out, std::string& what) {
  out = Prepared{};
  out.network = spec.network;
  int rc = profile(spec, out.profile, what);
  if (rc != 0) out.profile.clear();
  return rc;
}

int enter(const Prepared& p) {
  char* error = nullptr;
  errno = 0;
  if (sandbox_init(p.profile.c_str(), 0, &error) == 0) return 0;
  int err = errno != 0 ? errno : EINVAL;
  if (error) sandbox_free_error(error);
  return err;
}

void release(Prepared& p) {
  std::string().swap(p.profile);
}

}  // namespace confine
}  // namespace cordon
