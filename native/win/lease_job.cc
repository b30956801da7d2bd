// Whether a leased anchor can outlive its host where it runs: lease.h says
// what it guarantees. Asked by the anchor itself, once started: the Job
// Objects the host runs in do not say where its detached child landed.
#include "lease.h"

#include <cwchar>

namespace cordon {
namespace anchor {

OwnJob read_own_job() {
  OwnJob job;
  BOOL in = FALSE;
  if (!IsProcessInJob(GetCurrentProcess(), nullptr, &in) || !in) return job;
  job.in_job = true;
  // NULL: the calling process's immediate job, the innermost one it is in.
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION info;
  ZeroMemory(&info, sizeof info);
  if (QueryInformationJobObject(nullptr, JobObjectExtendedLimitInformation, &info, sizeof info, nullptr)) {
    job.limits_read = true;
    job.limit_flags = info.BasicLimitInformation.LimitFlags;
  }
#ifdef CORDON_TEST_HOOKS
  // Test builds only (test/win/README.md): CORDON_TEST_JOB_LIMITS=<hex> is
  // what the immediate job's LimitFlags read as, where Wine 8 answers every
  // job's limits with zeros. Membership is still the OS's own answer.
  wchar_t buf[16];
  DWORD n = GetEnvironmentVariableW(L"CORDON_TEST_JOB_LIMITS", buf, 16);
  if (n > 0 && n < 16) {
    job.limits_read = true;
    job.limit_flags = static_cast<DWORD>(wcstoul(buf, nullptr, 16));
    job.test_hook = true;
  }
#endif
  return job;
}

DWORD lease_refused_by(const OwnJob& job) {
  if (!job.in_job || !job.limits_read) return 0;
  // The anchor is in this job: its breakaway flags are about the anchor's
  // own children, not about the anchor. Kill-on-close ends it with the job.
  return (job.limit_flags & JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE) ? job.limit_flags : 0;
}

}  // namespace anchor
}  // namespace cordon
