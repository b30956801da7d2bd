// Internal contract of the Windows sources (not part of cordon.h, which stays
// free of platform headers): shared by the addon (host.cc) and the anchor
// (anchor.cc), both linked with job_object.cc, which implements it.
#pragma once

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <string>
#include <vector>

#include "../cordon.h"

namespace cordon {
namespace win {

// GetLastError() mapped onto the errno names the binding knows (ENOENT,
// EACCES, EPERM, ESRCH, EINVAL, ENOMEM, ...), as a positive errno value.
int errno_from(DWORD error);

std::string utf8(const std::wstring& w);
std::wstring wide(const std::string& s);

// The limits every tree's job carries: the tree dies when the last handle to
// the job closes, and no member may break away (CREATE_BREAKAWAY_FROM_JOB and
// silent breakaway both fail).
BOOL set_tree_limits(HANDLE job);
// Whether `job` carries those limits.
bool has_tree_limits(HANDLE job);

// Pids of the job's live members (JobObjectBasicProcessIdList).
int job_pids(HANDLE job, std::vector<DWORD>& out);

// Members of `job`, each re-checked to be in the job through a handle opened
// on its pid (a pid that was recycled after the listing is skipped), with
// its command line (or image path when the command line cannot be read).
int list_job(HANDLE job, std::vector<Member>& out);

// Number of live processes in the job, or a negative errno.
int job_active(HANDLE job);

// One instance of a leased anchor's endpoint (lease.cc): a duplex, overlapped
// byte pipe that only the current user may open or add instances to; `first`:
// FILE_FLAG_FIRST_PIPE_INSTANCE. INVALID_HANDLE_VALUE and `err` on failure.
HANDLE create_lease_pipe(const std::wstring& name, bool first, DWORD& err);

// Whether this process runs under Wine (ntdll exports wine_get_version).
bool under_wine();

}  // namespace win
}  // namespace cordon
