// The tree's Job Object, as the anchor holds it (job.cc).
//
// The job is created by the host (lib/anchor/windows.ts -> native/win/host.cc),
// unnamed, with kill-on-close and no breakaway; the host duplicates a handle
// into the anchor and sends its value as the first control line
// (`JOB <value>`, --job-from-host) before the command exists. Nothing else can
// open the job by name. Which handle decides is described in native/win/host.cc.
// Without --job-from-host the anchor makes the job itself. Either way the
// job carries the tree limits (win::set_tree_limits) and reports to the
// anchor's completion port before the command exists. While the anchor holds
// no job (none came, or --best-effort after a failure) the tree's tier is
// process-handle: the root's handle is its only identity.
//
// Limits (--memory, --max-processes, --cpu-quota; C12): set on the job before
// the command exists (win::set_job_limits), each with a call of its own; the
// anchor itself is not in the job, so the process limit counts the tree only.
// LIMITS (before READY) says what the OS accepted ("job"; a limit it refused
// is 0); a refusal without --best-effort is NOCONTAIN <errno> limits, and
// nothing runs (the anchor's control loop decides that). The job's completion
// port says when a limit was met (JOB_OBJECT_MSG_JOB_MEMORY_LIMIT: an
// allocation refused; JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT: a process creation
// refused): USAGE carries their counts in its oom-kills and pids.max-hits
// fields, next to the job's CPU time and peak committed memory and the most
// processes the port saw in the job at once (NEW_PROCESS / EXIT_PROCESS
// messages).
#pragma once

#include "anchor.h"

#include <string>
#include <vector>

namespace cordon {
namespace anchor {

// Whether any limit was asked for (--memory, --max-processes, --cpu-quota).
inline bool limits_asked(const Options& o) { return o.memory > 0 || o.processes > 0 || o.cpu_quota_us > 0; }

class Job {
 public:
  Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // JOB <value> (--job-from-host): the handle the host duplicated into this
  // process (0: the host could not).
  void receive(const std::string& value);
  // Whether the JOB line came.
  bool received() const { return received_; }

  // Readies the job before the command exists: the host's (`from_host`: the
  // one received, if any) or a new one; its tree limits set where missing,
  // its messages posted to `port` under kKeyJob. 0, or the error (the job is
  // still held: close() it).
  DWORD open(bool from_host, HANDLE port);
  // Sets the limits `o` asks for (traced): 0, or the first refusal's error;
  // limits_report() says what the OS took. `console_hosts`: console hosts
  // the job will hold beside the tree (a leased console root's conhost.exe,
  // which counts toward the job's process limit and is no member): added to
  // the process limit, and not to what limits_report() says.
  DWORD set_limits(const Options& o, int console_hosts = 0);
  // Takes every limit set_limits set off the job (its tree limits stay):
  // best-effort drops the limits before it drops containment. Whether any
  // limit was there to drop.
  bool drop_limits();
  // Lets go of the job: the tree's tier is process-handle from now on.
  void close();

  bool held() const { return job_ != nullptr; }
  HANDLE handle() const { return job_; }
  // "job-object" while the job is held, else "process-handle" (READY's tier).
  const char* tier() const { return job_ ? "job-object" : "process-handle"; }

  // The suspended command `process` in the job: 0 when it is (born there, or
  // assigned now and checked), else the error (traced); 0 without a job.
  DWORD assign(HANDLE process);

  // True only in a test build (CORDON_TEST_HOOKS) with CORDON_TEST_FAIL_ASSIGN=1
  // in the environment: the job then takes no process, neither at creation
  // (no PROC_THREAD_ATTRIBUTE_JOB_LIST is tried) nor by assign(), which fails
  // with ERROR_ACCESS_DENIED, as for a host inside a job that forbids nesting.
  // Always false in a release build.
  bool test_refuses_processes() const;
  // Whether `process` is in the job.
  bool contains(HANDLE process) const;

  // One message of the job's completion port (kKeyJob; its bytes field).
  void on_message(DWORD message);
  // A process of the job that is not a member (a terminal's console host,
  // pty.h): list() leaves it out, and empty() is true with it alone left.
  void set_not_member(DWORD pid) { not_member_ = pid; }
  // No process is left in the job (ACTIVE_PROCESS_ZERO since the last new
  // process, or the job's count says 0), but the one set_not_member() names.
  // Only with a job.
  bool empty() const;
  // The job's live processes (traces), or -1 without a job.
  int active() const;
  // The job's members (win::list_job), but the one set_not_member() names.
  void list(std::vector<Member>& out) const;
  // TerminateJobObject with kKilledCode.
  void terminate() const;
  // The polite stop for programs with windows (CTRL_BREAK reaches console
  // programs only): WM_CLOSE posted to every top-level window of the job's
  // members (not owned windows, not input-method ones). Each window's process
  // is opened and checked to be in the job while its windows are posted to,
  // so a recycled pid is never reached. How many windows were posted to.
  int close_windows() const;

  // The LIMITS line: what the OS accepted on the job ("none" without one).
  std::string limits_report() const;
  // The USAGE line (-1: not measured), or empty without a job.
  std::string usage_report() const;

 private:
  HANDLE job_ = nullptr;
  bool received_ = false;
  win::JobLimits limits_;        // what the OS accepted on the job
  // From the completion port:
  DWORD not_member_ = 0;          // set_not_member()
  bool zero_ = false;            // ACTIVE_PROCESS_ZERO came, and no NEW_PROCESS since
  int64_t processes_now_ = 0;
  int64_t processes_peak_ = -1;  // -1: no NEW_PROCESS message came (not even the root's)
  int64_t memory_hits_ = 0;      // JOB_OBJECT_MSG_JOB_MEMORY_LIMIT messages
  int64_t process_hits_ = 0;     // JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT messages
};

}  // namespace anchor
}  // namespace cordon
