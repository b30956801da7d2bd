// The Windows anchor's internal contract (cordon-anchor.exe only; the addon
// never includes it): what its files share. The anchor is one thread that
// drives one IO completion port (plus a waiter on the root and, for a leased
// tree, a thread per relayed output stream). One concern per file:
//   anchor.cc    the command line and main()
//   control.cc   the control loop (the host's commands), the termination
//                schedule, and the tree's life as the host hears it
//   channel.h    the control channel: its ends, who holds it, the writes
//   job.h        the tree's Job Object: where it comes from, its limits, the
//                command's assignment, its completion port's messages, USAGE
//   launch.h     the command: its command line, created suspended, resumed
//   warm.h       a warm anchor's LAUNCH (an anchor started ahead of need)
//   released.h   who still holds the captured output (RELEASED)
//   lease.h      a leased anchor's endpoint (ADOPT, INFO, OUTPUT)
//   relay.h      a leased tree's captured output, copied by the anchor
// The Win32 queries on a job (and the lease pipe's DACL) are win.h's,
// shared with the addon (job_object.cc).
#pragma once

#include "../protocol.h"
#include "win.h"

#include <cstdint>

namespace cordon {
namespace anchor {

// The completion keys on the anchor's port.
constexpr ULONG_PTR kKeyJob = 1;      // the job's messages (JOB_OBJECT_MSG_*)
constexpr ULONG_PTR kKeyControl = 2;  // reads of the first host's control pipe (fd 4)
constexpr ULONG_PTR kKeyRoot = 3;     // the root exited (posted by its waiter)
constexpr ULONG_PTR kKeyOut = 4;      // writes to the first host's pipe (fd 3)
constexpr ULONG_PTR kKeyEndpoint = 5;  // the lease endpoint's instances (and an adopter's connection)
constexpr ULONG_PTR kKeyTerminal = 6;  // --pty: the terminal's output is over (posted by its output thread)

// What our forced stop (TerminateJobObject, TerminateProcess) gives every
// member: not 1 (Node's kill() code), which a program also exits with by
// itself, so that a root exiting 1 as the forced stop begins is reported
// as its exit 1, and only a root ended by the forced stop as signal 9.
constexpr DWORD kKilledCode = 0xC0D00009;
constexpr DWORD kControlCExit = 0xC000013A;  // STATUS_CONTROL_C_EXIT: a root ended by CTRL_BREAK

// Milliseconds since boot (GetTickCount64).
inline int64_t now_ms() { return static_cast<int64_t>(GetTickCount64()); }

using Options = protocol::Options<wchar_t>;

// A bad command line (or no control channel): the synopsis on stderr, then
// ExitProcess(protocol::kUsageExit).
[[noreturn]] void usage(const char* why);

// The anchor's arguments (a cold anchor's command line, or a warm anchor's
// LAUNCH: `warm_launch`, whose --trace is not opened again); a bad one ends
// the process through usage().
Options parse_args(int argc, wchar_t** argv, bool warm_launch);

// The anchor's life (control.cc), from the control channel to its exit
// code: 0 once it is over, 70 when it has no completion port. `warm`: a warm
// anchor (warm.h), which takes its command from the LAUNCH.
int run(Options opts, bool warm);

}  // namespace anchor
}  // namespace cordon
