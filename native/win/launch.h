// Starting the command (launch.cc): its command line, its creation suspended,
// its place in the job, its resumption, and the waiter on its exit.
//
// C1: the command is created CREATE_SUSPENDED, checked with IsProcessInJob,
// assigned with AssignProcessToJobObject if it is not yet in, and only then
// resumed. If assignment fails: strict terminates the suspended process
// (nothing of it ran) and reports NOCONTAIN; best-effort resumes it with the
// retained process handle as the only identity (tier process-handle).
// The command is created with an attribute list attached (STARTUPINFOEXW.
// lpAttributeList): PROC_THREAD_ATTRIBUTE_HANDLE_LIST names its inheritable
// stdio, the only handles it inherits (never another inheritable handle of
// the anchor, such as one the anchor inherited from its host), and
// PROC_THREAD_ATTRIBUTE_JOB_LIST the job. A job list the OS rejects, or a job
// that refuses the process (ERROR_NOT_ENOUGH_QUOTA), is dropped and the
// suspended process is assigned instead (the C1 rules above). A handle list
// that cannot be built or is rejected is never dropped: nothing runs, and the
// anchor reports NOCONTAIN <errno> handle-list.
//
// The command is created with its resolved absolute path as lpApplicationName
// (so Windows' own search order never applies). A .bat/.cmd runs through
// %SystemRoot%\System32\cmd.exe /d /e:ON /v:OFF /s /c ""path" args": each
// argument bare when it holds only [A-Za-z0-9#$*+-./:?@\_], else in double
// quotes; arguments with " % ! CR LF, or quoted ones ending in a backslash,
// are refused (EXECFAIL EINVAL; lib/resolve.ts checkBatchArgs refuses them
// first with ERR_CORDON_UNSAFE_BATCH_ARG). Names Win32 rewrites (a trailing
// dot or space, ::$DATA) are refused here too (lib/resolve.ts normalises them).
// Shell mode (--cmd-shell, the `shell` option): the one argument is a line the
// system's cmd.exe runs verbatim as `cmd.exe /d /v:OFF /s /c "<line>"`. Any other
// command's arguments are quoted as libuv (Node's child_process) quotes them.
//
// --pty (pty.h): the command is attached to the anchor's pseudo console
// (PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE), inherits no handle, and is not put in
// a console process group of its own (Ctrl-C must reach it).
//
// A leased tree's root gets CREATE_NO_WINDOW (its own hidden console: the
// detached anchor has none to share).
#pragma once

#include "anchor.h"
#include "job.h"
#include "pty.h"

#include <string>

namespace cordon {
namespace anchor {

// The command's root process, held open until the anchor exits (so its pid,
// and its console process group id, cannot be reused meanwhile).
struct Root {
  HANDLE process = nullptr;
  DWORD pid = 0;
};

// Starts the command `opts` names in `job` (C1). `channel`: the anchor's own
// ends of its control channel (fds 3 and 4), which Wine's console host may
// hold copies of (closed here first). An empty string once the root runs:
// `root` holds it, and a waiter posts kKeyRoot to `port` when it exits.
// Else the line that says why nothing runs (EXECFAIL, NOCWD, NOCONTAIN
// job-object), for the caller to send; `root` may then hold a process that
// was terminated.
// `pty`: the terminal (pty.h) the command is attached to, or nullptr.
std::string launch(const Options& opts, bool leased, Job& job, HANDLE port, const HANDLE channel[2], Root& root,
                   PseudoConsole* pty);

// The anchor must never hold the command's pipes: closing its copies of its
// standard handles (after launch) is what lets the host see EOF once the
// tree's own writers are gone.
void release_stdio();

}  // namespace anchor
}  // namespace cordon
