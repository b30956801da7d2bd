// Internal contract of the Windows sources (not part of cordon.h, which stays
// free of platform headers): shared by the addon (host.cc) and the anchor
// (its files: anchor.h), both linked with job_object.cc, which implements it
// (create_lease_pipe: lease.cc, the anchor's only).
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

// The SID of this process's token user, copied into `sid` (sized by the call).
bool own_sid(std::vector<unsigned char>& sid);

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
// The system's console hosts in the job (conhost.exe, started beside a
// console program without a console to share) are not members: left out.
int list_job(HANDLE job, std::vector<Member>& out);

// Whether the program at `path` is a console program (its PE header's
// subsystem is IMAGE_SUBSYSTEM_WINDOWS_CUI): started without a console to
// share, it gets a console host of its own (conhost.exe, its child). false
// when the file cannot be read as a PE image.
bool console_program(const std::wstring& path);

// Number of live processes in the job, or a negative errno.
int job_active(HANDLE job);

// One instance of a leased anchor's endpoint (lease.cc): a duplex, overlapped
// byte pipe that only the current user may open or add instances to; `first`:
// FILE_FLAG_FIRST_PIPE_INSTANCE. INVALID_HANDLE_VALUE and `err` on failure.
HANDLE create_lease_pipe(const std::wstring& name, bool first, DWORD& err);

// Whether this process runs under Wine (ntdll exports wine_get_version).
bool under_wine();

// What a process's primary token says of who it is, as text compared whole:
// its user, its groups with their attributes (enabled, deny-only, ...), its
// privileges with theirs (enabled or not; removed ones absent), its
// integrity level (where the OS has one: Wine answers none) and its session.
// A child created without a token of its own gets a copy of its parent's: a
// warm anchor's is its host's as it was when it started. false (and
// GetLastError) where it cannot be read.
bool token_identity(HANDLE process, std::string& out);

// Resource limits on a tree's job (the anchor's --memory, --max-processes,
// --cpu-quota; 0: none): the job's committed memory in bytes, its active
// processes, CPU time in microseconds per 100 ms (in cores: quota / 100000).
struct JobLimits {
  int64_t memory = 0;
  int64_t processes = 0;
  int64_t cpu_quota_us = 0;
  bool any() const { return memory > 0 || processes > 0 || cpu_quota_us > 0; }
};

// Sets each limit of `want` on `job` with a call of its own (so a refusal is
// that limit's): JOB_OBJECT_LIMIT_JOB_MEMORY, JOB_OBJECT_LIMIT_ACTIVE_PROCESS
// (next to the tree's kill-on-close, kept), and hard-capped CPU rate control
// (a share of the whole machine: cores / processors x 10000). `applied` gets
// what the OS accepted (0: refused or not asked; the CPU quota as the rate it
// took, converted back), the return value the first refusal's error (0: none).
DWORD set_job_limits(HANDLE job, const JobLimits& want, JobLimits& applied);

// What the tree used, from the job: CPU time (user + kernel of every member
// that ran in it) and the peak committed memory of the job (PeakJobMemoryUsed);
// -1 where it is not measured: under Wine, which keeps no CPU times for a job
// and answers the extended query with zeros, and a peak of 0, which no job
// that ran a process has.
struct JobUsage {
  int64_t cpu_us = -1;
  int64_t memory_peak = -1;
};
JobUsage job_usage(HANDLE job);

}  // namespace win
}  // namespace cordon
