// The tree's Job Object, as the anchor holds it: job.h says what it
// guarantees. The Win32 queries are job_object.cc's (win.h).
#include "job.h"

#include <cstdlib>
#include <cwchar>
#include <map>
#include <set>

namespace cordon {
namespace anchor {

// Test builds only (compiled with CORDON_TEST_HOOKS; test/win/README.md): the
// variable is read from the anchor's environment, which is the command's
// `env`, which a caller sets: a build without CORDON_TEST_HOOKS (every release
// build: npm install, the prebuilds) has no such hook and never reads it.
// CORDON_TEST_FAIL_ASSIGN=1: the job refuses the command; =limits: it
// refuses it only while limits are set (as a memory limit below a new
// process's commit does).
bool Job::test_refuses_processes() const {
#ifdef CORDON_TEST_HOOKS
  wchar_t buf[8];
  DWORD n = GetEnvironmentVariableW(L"CORDON_TEST_FAIL_ASSIGN", buf, 8);
  if (n == 0 || n >= 8) return false;
  if (wcscmp(buf, L"1") == 0) return true;
  return wcscmp(buf, L"limits") == 0 && limits_.any();
#else
  return false;
#endif
}

namespace {

struct WindowWalk {
  std::set<DWORD> pids;                      // the job's members as listed
  std::map<DWORD, std::vector<HWND>> found;  // their top-level windows
};

BOOL CALLBACK on_window(HWND window, LPARAM param) {
  auto* walk = reinterpret_cast<WindowWalk*>(param);
  DWORD pid = 0;
  GetWindowThreadProcessId(window, &pid);
  if (!walk->pids.count(pid) || GetWindow(window, GW_OWNER) != nullptr) return TRUE;
  wchar_t cls[32];
  int n = GetClassNameW(window, cls, 32);
  if (n > 0 && (wcscmp(cls, L"IME") == 0 || wcscmp(cls, L"MSCTFIME UI") == 0)) return TRUE;
  walk->found[pid].push_back(window);
  return TRUE;
}

}  // namespace

int Job::close_windows() const {
  if (!job_) return 0;
  WindowWalk walk;
  std::vector<DWORD> pids;
  if (win::job_pids(job_, pids) < 0) return 0;
  walk.pids.insert(pids.begin(), pids.end());
  EnumWindows(on_window, reinterpret_cast<LPARAM>(&walk));
  int posted = 0;
  for (auto& entry : walk.found) {
    // The handle pins the process: in the job now, it is a member, not one
    // that took over a recycled pid (IsProcessInJob needs
    // PROCESS_QUERY_INFORMATION under Wine, as in win::list_job).
    HANDLE h = OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, entry.first);
    if (!h) h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, entry.first);
    if (!h) continue;
    BOOL in_job = FALSE;
    if (IsProcessInJob(h, job_, &in_job) && in_job && WaitForSingleObject(h, 0) == WAIT_TIMEOUT) {
      for (HWND window : entry.second) {
        // (A window of another thread of the same process, made since, is
        // still that member's; one destroyed since fails the post.)
        DWORD owner = 0;
        GetWindowThreadProcessId(window, &owner);
        if (owner == entry.first && PostMessageW(window, WM_CLOSE, 0, 0)) posted++;
      }
    }
    CloseHandle(h);
  }
  protocol::trace("WM_CLOSE posted to %d window(s) of %zu member(s) with windows", posted, walk.found.size());
  return posted;
}

void Job::receive(const std::string& value) {
  // The host's copy of the tree's job handle, duplicated into this process.
  received_ = true;
  job_ = reinterpret_cast<HANDLE>(static_cast<uintptr_t>(_strtoui64(value.c_str(), nullptr, 10)));
  protocol::trace("job handle %s from the host", value.c_str());
}

DWORD Job::open(bool from_host, HANDLE port) {
  DWORD err = 0;
  if (from_host) {
    if (!job_) err = ERROR_INVALID_HANDLE;
  } else {
    job_ = CreateJobObjectW(nullptr, nullptr);
    if (!job_) err = GetLastError();
  }
  if (job_ && !win::has_tree_limits(job_) && !win::set_tree_limits(job_)) err = GetLastError();
  if (job_ && !err) {
    JOBOBJECT_ASSOCIATE_COMPLETION_PORT acp;
    acp.CompletionKey = reinterpret_cast<PVOID>(kKeyJob);
    acp.CompletionPort = port;
    if (!SetInformationJobObject(job_, JobObjectAssociateCompletionPortInformation, &acp, sizeof acp)) {
      err = GetLastError();
    }
  }
  return err;
}

DWORD Job::set_limits(const Options& o, int console_hosts) {
  win::JobLimits want;
  want.memory = o.memory;
  want.processes = o.processes > 0 ? o.processes + console_hosts : 0;
  want.cpu_quota_us = o.cpu_quota_us;
  DWORD err = win::set_job_limits(job_, want, limits_);
  if (limits_.processes > 0) limits_.processes -= console_hosts;
  protocol::trace("limits: memory %lld processes %lld cpu %lld us/100ms accepted (error %lu)",
                  static_cast<long long>(limits_.memory), static_cast<long long>(limits_.processes),
                  static_cast<long long>(limits_.cpu_quota_us), err);
  return err;
}

bool Job::drop_limits() {
  if (!job_ || !limits_.any()) return false;
  // The tree limits alone (kill-on-close, no breakaway) replace every flag,
  // and CPU rate control is turned off; what the OS took is none now.
  if (!win::set_tree_limits(job_)) protocol::trace("drop limits: tree limits: error %lu", GetLastError());
  if (limits_.cpu_quota_us > 0) {
    JOBOBJECT_CPU_RATE_CONTROL_INFORMATION off;
    ZeroMemory(&off, sizeof off);
    if (!SetInformationJobObject(job_, JobObjectCpuRateControlInformation, &off, sizeof off)) {
      protocol::trace("drop limits: cpu rate: error %lu", GetLastError());
    }
  }
  limits_ = win::JobLimits();
  protocol::trace("limits dropped (best-effort keeps containment first)");
  return true;
}

void Job::close() {
  if (job_) CloseHandle(job_);
  job_ = nullptr;
}

bool Job::contains(HANDLE process) const {
  BOOL in = FALSE;
  return IsProcessInJob(process, job_, &in) && in;
}

DWORD Job::assign(HANDLE process) {
  if (job_ && contains(process)) protocol::trace("born in the job (PROC_THREAD_ATTRIBUTE_JOB_LIST)");
  if (!job_ || contains(process)) return 0;
  const bool refused = test_refuses_processes();
  bool assigned = !refused && AssignProcessToJobObject(job_, process);
  DWORD err = assigned ? 0 : (refused ? ERROR_ACCESS_DENIED : GetLastError());
  if (assigned && !contains(process)) {
    assigned = false;
    err = ERROR_ACCESS_DENIED;
  }
  if (assigned) return 0;
  protocol::trace("AssignProcessToJobObject: error %lu", err);
  return err;
}

void Job::on_message(DWORD message) {
  if (message == JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO) {
    protocol::trace("job: no active process");
    zero_ = true;
  } else if (message == JOB_OBJECT_MSG_NEW_PROCESS) {
    zero_ = false;
    if (++processes_now_ > processes_peak_) processes_peak_ = processes_now_;
  } else if (message == JOB_OBJECT_MSG_EXIT_PROCESS || message == JOB_OBJECT_MSG_ABNORMAL_EXIT_PROCESS) {
    if (processes_now_ > 0) processes_now_--;
  } else if (message == JOB_OBJECT_MSG_JOB_MEMORY_LIMIT) {
    protocol::trace("job: memory limit met");
    memory_hits_++;
  } else if (message == JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT) {
    protocol::trace("job: process limit met");
    process_hits_++;
  }
}

bool Job::empty() const {
  if (zero_) return true;
  int n = win::job_active(job_);
  if (n == 0) return true;
  if (!not_member_ || n > 1) return false;
  std::vector<Member> all;
  win::list_job(job_, all);
  return all.empty() || (all.size() == 1 && all[0].pid == static_cast<int64_t>(not_member_));
}

int Job::active() const { return job_ ? win::job_active(job_) : -1; }

void Job::list(std::vector<Member>& out) const {
  win::list_job(job_, out);
  if (!not_member_) return;
  for (size_t i = 0; i < out.size(); i++) {
    if (out[i].pid == static_cast<int64_t>(not_member_)) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
}

void Job::terminate() const { TerminateJobObject(job_, kKilledCode); }

std::string Job::limits_report() const {
  // What the OS took on the job the tree runs in (none without one).
  const win::JobLimits& a = job_ ? limits_ : win::JobLimits();
  return protocol::limits(a.memory, a.processes, a.cpu_quota_us, job_ && a.any() ? "job" : "none");
}

std::string Job::usage_report() const {
  if (!job_) return std::string();
  win::JobUsage u = win::job_usage(job_);
  return protocol::usage(u.cpu_us, u.memory_peak, processes_peak_, limits_.memory > 0 ? memory_hits_ : -1,
                         limits_.processes > 0 ? process_hits_ : -1);
}

}  // namespace anchor
}  // namespace cordon
