// macOS enumeration and verified signalling: libproc + sysctl, no pidfd.
//
// Only documented userland interfaces: <libproc.h> (proc_listpids,
// proc_pidinfo, proc_pidfdinfo), <sys/proc_info.h> (their structs and
// flavors), <sys/sysctl.h> (kern.proc.pid, kern.procargs2, kern.argmax) and
// <sys/proc.h> (the S* status values and kinfo_proc's extern_proc).
//
// Process identity is the kernel's start stamp, p_start (microtime at fork,
// kept across exec), as PROC_PIDTBSDINFO and kern.proc.pid both report it:
// start_time = tv_sec * 1e6 + tv_usec.
//
// Output holders. The watched FileIds come from fstat() in the anchor, and
// fstat() and proc_pidfdinfo() do not describe a descriptor alike (xnu):
//   - vnodes (named FIFOs): both go through vn_stat(), and proc_pidfdinfo
//     copies st_dev/st_ino into vst_dev (32 bits)/vst_ino: compare directly.
//   - pipes: pipe_stat() sets st_dev = 0, st_ino = VM_KERNEL_ADDRHASH(pipe);
//     fill_pipeinfo() leaves vst_dev/vst_ino at 0 but sets pipe_handle to
//     the same VM_KERNEL_ADDRHASH(pipe): compare st_ino with pipe_handle.
//   - sockets (what Node's stdio 'pipe' is on macOS: a socketpair): fstat()
//     gives st_dev = NODEV and a lazily numbered fake inode (uipc_sense),
//     while proc_pidfdinfo() never fills soi_stat (all zero) and names the
//     socket only by soi_so, a hash of its address. No documented call maps
//     one onto the other for another process's descriptor. So this file
//     remembers, for the sockets the *calling* process holds, which fstat()
//     identity goes with which soi_so (remember_own_sockets). probe() does
//     that, and the anchor calls probe() first thing, while fds 1 and 2 are
//     still the captured output. A socket watch that was never seen that way
//     is answered conservatively: any member holding an AF_UNIX socket counts
//     as holding it (never a false "released").
#include "../cordon.h"
#include "../posix/procargs.h"

#include <libproc.h>
#include <sys/event.h>
#include <sys/proc.h>
#include <sys/proc_info.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysctl.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <unordered_set>
#include <utility>

namespace cordon {
namespace {

constexpr size_t kCommandLimit = 4096;  // as much as the Linux side reads
constexpr uint32_t kNoDev32 = 0xffffffffu;  // NODEV, (dev_t)-1, in 32 bits

struct Info {
  int64_t pid = 0, ppid = 0, pgid = 0;
  uint64_t start = 0;
  uint64_t unique_id = 0, parent_unique_id = 0;  // 0: not known
  int32_t id_version = 0, parent_id_version = 0;  // 0: not known (before macOS 15.4: the parent's)
  uid_t euid = 0, ruid = 0, svuid = 0;
  uint32_t status = 0;   // SIDL, SRUN, SSLEEP, SSTOP, SZOMB
  bool traced = false;   // reparented to a debugger (p_oppid is the real parent)
  bool exiting = false;  // in exit (P_LEXIT): PROC_FLAG_INEXIT, kern.proc.pid's P_WEXIT
  std::string name;      // pbi_name (or pbi_comm / p_comm)
};

uint64_t stamp(uint64_t sec, uint64_t usec) { return sec * 1000000ull + usec; }

bool valid_pid(int64_t pid) { return pid > 0 && pid <= INT_MAX; }

// kern.proc.pid: not limited to the caller's uid (PROC_PIDTBSDINFO is), and
// it reports the same p_start. Zombies are included (p_stat == SZOMB).
bool read_kinfo(int64_t pid, bool include_zombies, Info& out) {
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, static_cast<int>(pid)};
  struct kinfo_proc kp;
  std::memset(&kp, 0, sizeof kp);
  size_t len = sizeof kp;
  if (sysctl(mib, 4, &kp, &len, nullptr, 0) != 0) return false;
  if (len != sizeof kp || kp.kp_proc.p_pid != static_cast<pid_t>(pid)) return false;  // gone
  uint32_t status = static_cast<uint32_t>(static_cast<unsigned char>(kp.kp_proc.p_stat));
  if (status == SZOMB && !include_zombies) return false;
  out.pid = pid;
  out.unique_id = out.parent_unique_id = 0;  // (kinfo_proc has no unique ids)
  out.id_version = out.parent_id_version = 0;
  out.euid = kp.kp_eproc.e_ucred.cr_uid;
  out.ruid = kp.kp_eproc.e_pcred.p_ruid;
  out.svuid = kp.kp_eproc.e_pcred.p_svuid;
  out.ppid = kp.kp_eproc.e_ppid;
  out.pgid = kp.kp_eproc.e_pgid;
  out.start = stamp(static_cast<uint64_t>(kp.kp_proc.p_starttime.tv_sec),
                    static_cast<uint64_t>(kp.kp_proc.p_starttime.tv_usec));
  out.status = status;
  out.traced = (kp.kp_proc.p_flag & P_TRACED) != 0;
  out.exiting = (kp.kp_proc.p_flag & P_WEXIT) != 0;  // (xnu-11417 kern_sysctl.c:1141-1142)
  char comm[sizeof kp.kp_proc.p_comm + 1];
  std::memcpy(comm, kp.kp_proc.p_comm, sizeof kp.kp_proc.p_comm);
  comm[sizeof kp.kp_proc.p_comm] = '\0';
  out.name = comm;
  return true;
}

// The interfaces here that the SDK's <sys/proc_info.h> leaves out (its
// PRIVATE part, as XNU's bsd/sys/proc_info_private.h defines it: read in
// xnu-7195, macOS 11, and xnu-11417, macOS 15.4): the
// BSD info with the process's unique ids, PROC_PIDT_BSDINFOWITHUNIQID, which
// proc_pidinfo answers like PROC_PIDTBSDINFO (the same permission check, the
// same zombie rule) with struct proc_uniqidentifierinfo after it; and that
// struct alone, PROC_PIDUNIQIDENTIFIERINFO, which the kernel answers for any
// caller (no same-user check: proc_info.c, "Certain operations don't require
// privileges"), so another user's process (a setuid program a member
// started) has ids too. The kernel copies out exactly these sizes; any other
// answer falls back to PROC_PIDTBSDINFO or kern.proc.pid, with the ids unknown.
constexpr int kUniqIdentifierInfo = 17;
constexpr int kBsdInfoWithUniqId = 18;
struct UniqIdentifierInfo {
  uint8_t uuid[16];
  uint64_t unique_id;
  uint64_t parent_unique_id;
  int32_t id_version;
  // p_orig_ppidversion since xnu-11417 (macOS 15.4): the id_version of the
  // parent that forked the process, kept across exec and reparenting;
  // reserved (0) before.
  int32_t orig_ppid_version;
  uint64_t reserved3;
  uint64_t reserved4;
};
struct BsdInfoWithUniqId {
  struct proc_bsdinfo bsd;
  UniqIdentifierInfo uniq;
};
static_assert(sizeof(UniqIdentifierInfo) == 56, "proc_uniqidentifierinfo as XNU lays it out");

// PROC_PIDT_BSDINFOWITHUNIQID (or PROC_PIDTBSDINFO). With arg 0 the kernel
// does not look at zombies (ESRCH); with arg 1 it does (proc_find_zombref)
// and reports pbi_status == SZOMB.
bool read_info(int64_t pid, bool include_zombies, Info& out) {
  if (!valid_pid(pid)) return false;
  BsdInfoWithUniqId with;
  std::memset(&with, 0, sizeof with);
  struct proc_bsdinfo& bi = with.bsd;
  errno = 0;
  int n = proc_pidinfo(static_cast<int>(pid), kBsdInfoWithUniqId, include_zombies ? 1 : 0, &with,
                       static_cast<int>(sizeof with));
  bool ids = n == static_cast<int>(sizeof with);
  if (!ids && errno != ESRCH && errno != EPERM) {
    std::memset(&with, 0, sizeof with);
    errno = 0;
    n = proc_pidinfo(static_cast<int>(pid), PROC_PIDTBSDINFO, include_zombies ? 1 : 0, &bi, static_cast<int>(sizeof bi));
    if (n == static_cast<int>(sizeof bi)) n = static_cast<int>(sizeof with);
  }
  if (n == static_cast<int>(sizeof with)) {
    out.unique_id = ids ? with.uniq.unique_id : 0;
    out.parent_unique_id = ids ? with.uniq.parent_unique_id : 0;
    out.id_version = ids ? with.uniq.id_version : 0;
    out.parent_id_version = ids ? with.uniq.orig_ppid_version : 0;
    out.euid = bi.pbi_uid;
    out.ruid = bi.pbi_ruid;
    out.svuid = bi.pbi_svuid;
    if (bi.pbi_status == SZOMB && !include_zombies) return false;
    out.pid = pid;
    out.ppid = bi.pbi_ppid;
    out.pgid = bi.pbi_pgid;
    out.start = stamp(bi.pbi_start_tvsec, bi.pbi_start_tvusec);
    out.status = bi.pbi_status;
    out.traced = (bi.pbi_flags & PROC_FLAG_TRACED) != 0;
    out.exiting = (bi.pbi_flags & PROC_FLAG_INEXIT) != 0;  // (proc_info.c:717-718)
    char name[sizeof bi.pbi_name + 1];
    std::memcpy(name, bi.pbi_name, sizeof bi.pbi_name);
    name[sizeof bi.pbi_name] = '\0';
    if (name[0] == '\0') {
      std::memcpy(name, bi.pbi_comm, sizeof bi.pbi_comm);
      name[sizeof bi.pbi_comm] = '\0';
    }
    out.name = name;
    return true;
  }
  if (errno == ESRCH) return false;  // no such process (or a zombie, without arg 1)
  // EPERM: another uid's process (a setuid program in the tree), or a
  // sandbox refusal. kern.proc.pid still answers, with the same stamp, and
  // PROC_PIDUNIQIDENTIFIERINFO with the ids.
  if (!read_kinfo(pid, include_zombies, out)) return false;
  UniqIdentifierInfo uniq;
  std::memset(&uniq, 0, sizeof uniq);
  if (proc_pidinfo(static_cast<int>(pid), kUniqIdentifierInfo, include_zombies ? 1 : 0, &uniq,
                   static_cast<int>(sizeof uniq)) == static_cast<int>(sizeof uniq)) {
    out.unique_id = uniq.unique_id;
    out.parent_unique_id = uniq.parent_unique_id;
    out.id_version = uniq.id_version;
    out.parent_id_version = uniq.orig_ppid_version;
  }
  return true;
}

// proc_listpids(type, typeinfo): returns bytes (0 with errno set on failure,
// 0 with errno untouched when nothing matches). Returns 0 or an errno value.
int list_pids(uint32_t type, uint32_t typeinfo, std::vector<int>& out) {
  out.clear();
  for (size_t attempt = 0; attempt < 4; attempt++) {
    errno = 0;
    int need = proc_listpids(type, typeinfo, nullptr, 0);  // (nprocs + 20) ints, in bytes
    if (need <= 0) return errno != 0 ? errno : EIO;
    size_t cap = static_cast<size_t>(need) / sizeof(int) + 64 * (attempt + 1);
    out.assign(cap, 0);
    errno = 0;
    int got = proc_listpids(type, typeinfo, out.data(), static_cast<int>(cap * sizeof(int)));
    if (got <= 0) {
      out.clear();
      return errno;  // 0: nothing matched
    }
    size_t n = static_cast<size_t>(got) / sizeof(int);
    if (n < cap) {
      out.resize(n);
      return 0;
    }
    // The buffer filled up: the table grew between the two calls. Again.
  }
  out.clear();
  return ENOMEM;
}

// The descriptors of `pid` (PROC_PIDLISTFDS). Returns 0 or an errno value.
int list_fds(int64_t pid, std::vector<proc_fdinfo>& out) {
  out.clear();
  if (!valid_pid(pid)) return ESRCH;
  for (size_t attempt = 0; attempt < 4; attempt++) {
    errno = 0;
    int need = proc_pidinfo(static_cast<int>(pid), PROC_PIDLISTFDS, 0, nullptr, 0);
    if (need <= 0) return errno != 0 ? errno : EIO;
    size_t cap = static_cast<size_t>(need) / sizeof(proc_fdinfo) + 16 * (attempt + 1);
    out.resize(cap);
    errno = 0;
    int got = proc_pidinfo(static_cast<int>(pid), PROC_PIDLISTFDS, 0, out.data(),
                           static_cast<int>(cap * sizeof(proc_fdinfo)));
    if (got <= 0) {
      out.clear();
      return errno;  // 0: no descriptors
    }
    size_t n = static_cast<size_t>(got) / sizeof(proc_fdinfo);
    if (n < cap) {
      out.resize(n);
      return 0;
    }
  }
  out.clear();
  return ENOMEM;
}

// ---- socket identities of the caller's own descriptors ---------------------

struct OwnSocket {
  FileId id;        // as fstat() gives it (the same casts as anchor.cc)
  uint64_t handle;  // soi_so
};

std::mutex& own_mutex() {
  static std::mutex m;
  return m;
}

std::vector<OwnSocket>& own_sockets() {
  static std::vector<OwnSocket> v;
  return v;
}

bool fstat_id(int fd, FileId& id) {
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISSOCK(sb.st_mode)) return false;
  // A unix socket gets its fake inode number on its first stat; the very
  // first one numbered since boot is 0 and is renumbered on the next stat.
  if (sb.st_ino == 0 && (fstat(fd, &sb) != 0 || !S_ISSOCK(sb.st_mode))) return false;
  id = FileId{static_cast<uint64_t>(sb.st_dev), static_cast<uint64_t>(sb.st_ino)};
  return true;
}

void remember_own_sockets() {
  const int self = static_cast<int>(getpid());
  std::vector<proc_fdinfo> fds;
  if (list_fds(self, fds) != 0) return;
  std::lock_guard<std::mutex> lock(own_mutex());
  std::vector<OwnSocket>& known = own_sockets();
  for (const proc_fdinfo& f : fds) {
    if (f.proc_fdtype != PROX_FDTYPE_SOCKET) continue;
    FileId before, after;
    if (!fstat_id(f.proc_fd, before)) continue;
    struct socket_fdinfo si;
    std::memset(&si, 0, sizeof si);
    if (proc_pidfdinfo(self, f.proc_fd, PROC_PIDFDSOCKETINFO, &si, static_cast<int>(sizeof si)) !=
        static_cast<int>(sizeof si)) {
      continue;
    }
    if (si.psi.soi_family != AF_UNIX) continue;
    // Another thread may have closed and reused the fd in between: keep the
    // pair only if fstat() names the same socket on both sides of the query.
    if (!fstat_id(f.proc_fd, after) || after.dev != before.dev || after.ino != before.ino) continue;
    bool have = false;
    for (const OwnSocket& k : known) {
      if (k.id.dev == before.dev && k.id.ino == before.ino && k.handle == si.psi.soi_so) {
        have = true;
        break;
      }
    }
    if (!have) known.push_back(OwnSocket{before, si.psi.soi_so});
  }
  constexpr size_t kKeep = 256;
  if (known.size() > kKeep) known.erase(known.begin(), known.end() - kKeep);
}

// ---- matching a member's descriptors against the watched FileIds ----------

struct Watch {
  std::vector<FileId> files;          // every watched id (vnode and pipe comparisons)
  std::vector<uint64_t> sockets;      // soi_so of the watched sockets we could resolve
  bool unresolved_socket = false;     // a NODEV (socket) watch we could not resolve
  // A watched id that is neither a pipe (dev 0) nor a socket (NODEV): a named
  // FIFO. Only then are a member's vnodes asked about: PROC_PIDFDVNODEINFO
  // goes through vn_stat(), which asks the file's filesystem (a hung NFS
  // mount would hold the anchor there). The anchor watches only the pipes
  // the host made, so it never does.
  bool vnodes = false;
  bool empty() const { return files.empty(); }
};

Watch resolve(const std::vector<FileId>& watched) {
  Watch w;
  w.files = watched;
  if (watched.empty()) return w;
  remember_own_sockets();  // finds them if the caller still holds them
  std::lock_guard<std::mutex> lock(own_mutex());
  for (const FileId& id : watched) {
    if (id.dev != 0 && static_cast<uint32_t>(id.dev) != kNoDev32) w.vnodes = true;
    bool found = false;
    for (const OwnSocket& k : own_sockets()) {
      if (k.id.dev == id.dev && k.id.ino == id.ino) {
        w.sockets.push_back(k.handle);
        found = true;
      }
    }
    if (!found && static_cast<uint32_t>(id.dev) == kNoDev32) w.unresolved_socket = true;
  }
  return w;
}

bool holds_any(int64_t pid, const Watch& w) {
  if (w.empty()) return false;
  std::vector<proc_fdinfo> fds;
  if (list_fds(pid, fds) != 0) return false;
  const int p = static_cast<int>(pid);
  for (const proc_fdinfo& f : fds) {
    if (f.proc_fdtype == PROX_FDTYPE_VNODE) {
      if (!w.vnodes) continue;
      struct vnode_fdinfo vi;
      std::memset(&vi, 0, sizeof vi);
      if (proc_pidfdinfo(p, f.proc_fd, PROC_PIDFDVNODEINFO, &vi, static_cast<int>(sizeof vi)) !=
          static_cast<int>(sizeof vi)) {
        continue;
      }
      for (const FileId& id : w.files) {
        if (static_cast<uint32_t>(id.dev) == vi.pvi.vi_stat.vst_dev && id.ino == vi.pvi.vi_stat.vst_ino)
          return true;
      }
    } else if (f.proc_fdtype == PROX_FDTYPE_PIPE) {
      struct pipe_fdinfo pi;
      std::memset(&pi, 0, sizeof pi);
      if (proc_pidfdinfo(p, f.proc_fd, PROC_PIDFDPIPEINFO, &pi, static_cast<int>(sizeof pi)) !=
          static_cast<int>(sizeof pi)) {
        continue;
      }
      for (const FileId& id : w.files) {
        if (static_cast<uint32_t>(id.dev) == 0 && id.ino != 0 && id.ino == pi.pipeinfo.pipe_handle)
          return true;
      }
    } else if (f.proc_fdtype == PROX_FDTYPE_SOCKET) {
      if (w.sockets.empty() && !w.unresolved_socket) continue;
      struct socket_fdinfo si;
      std::memset(&si, 0, sizeof si);
      if (proc_pidfdinfo(p, f.proc_fd, PROC_PIDFDSOCKETINFO, &si, static_cast<int>(sizeof si)) !=
          static_cast<int>(sizeof si)) {
        continue;
      }
      for (uint64_t h : w.sockets) {
        if (h == si.psi.soi_so) return true;
      }
      if (w.unresolved_socket && si.psi.soi_family == AF_UNIX) return true;
    }
  }
  return false;
}

// ---- command lines ----------------------------------------------------------

size_t arg_max() {
  static const size_t value = [] {
    int mib[2] = {CTL_KERN, KERN_ARGMAX};
    int argmax = 0;
    size_t len = sizeof argmax;
    if (sysctl(mib, 2, &argmax, &len, nullptr, 0) != 0 || argmax <= 0) return size_t{0};
    return static_cast<size_t>(argmax);
  }();
  return value;
}

// kern.procargs2, parsed by parse_procargs2 (native/posix/procargs.h, which
// says what XNU returns). The buffer must hold the whole area (a short one
// gets its tail), hence kern.argmax. Another uid's process answers EINVAL:
// the caller falls back. Fills `argv` (the arguments joined by spaces, up to
// kCommandLimit) and, if given, `env` (the environment strings, each
// followed by a NUL) and `verdict`. 0 or an errno value: E2BIG when the area
// is larger than the buffer (only its tail was returned).
int read_procargs(int64_t pid, std::string* argv, std::string* env, ProcEnv* verdict = nullptr) {
  size_t cap = arg_max();
  if (cap < sizeof(int) || !valid_pid(pid)) return EINVAL;
  thread_local std::vector<char> buf;
  if (buf.size() < cap) buf.resize(cap);
  int mib[3] = {CTL_KERN, KERN_PROCARGS2, static_cast<int>(pid)};
  size_t len = cap;
  if (sysctl(mib, 3, buf.data(), &len, nullptr, 0) != 0) return errno;
  if (len <= sizeof(int) || len > cap) return EIO;
  ProcArgsHints hints;
  hints.pointer_size = 8;  // macOS 11 and later run 64-bit processes only
  hints.self = pid == static_cast<int64_t>(getpid());
  hints.capacity = cap;
  ProcArgs parsed = parse_procargs2(buf.data(), len, hints);
  if (!parsed.valid) return EIO;
  if (parsed.cut) return E2BIG;
  if (argv) {
    argv->clear();
    for (const std::string& arg : parsed.argv) {
      if (argv->size() >= kCommandLimit) break;
      if (!argv->empty()) *argv += ' ';
      argv->append(arg);
    }
    if (argv->size() > kCommandLimit) argv->resize(kCommandLimit);
  }
  if (env) env->swap(parsed.env);
  if (verdict) *verdict = parsed.verdict;
  return 0;
}

bool read_args(int64_t pid, std::string& out) { return read_procargs(pid, &out, nullptr) == 0 && !out.empty(); }

std::string command_of(const Info& in) {
  std::string cmd;
  if (read_args(in.pid, cmd)) return cmd;
  return in.name.empty() ? std::string() : "[" + in.name + "]";
}

char state_of(uint32_t status) {
  switch (status) {
    case SZOMB: return 'Z';
    case SRUN: return 'R';
    case SSTOP: return 'T';
    default: return 'S';  // SIDL, SSLEEP; p_stat is coarse on macOS (mostly SRUN)
  }
}

// A member record with the identity fields only (no command, no holds).
Member identity(const Info& in) {
  Member m;
  m.pid = in.pid;
  m.ppid = in.ppid;
  m.pgid = in.pgid;
  m.start_time = in.start;
  m.state = state_of(in.status);
  m.name = in.name;
  m.unique_id = in.unique_id;
  m.parent_unique_id = in.parent_unique_id;
  m.id_version = in.id_version;
  m.parent_id_version = in.parent_id_version;
  return m;
}

// Is `pid` a descendant of `anchor`? Walks the live parent chain.
bool descends_from(int64_t pid, int64_t anchor) {
  int64_t cur = pid;
  for (int depth = 0; depth < 4096; depth++) {
    Info in;
    if (!read_info(cur, false, in)) return false;
    if (in.ppid == anchor) return true;
    if (in.ppid <= 1) return false;
    cur = in.ppid;
  }
  return false;
}

}  // namespace

int probe(Probe& out) {
  out = Probe{};
  out.xnu = true;
  std::vector<int> pids;
  out.proc_scan = list_pids(PROC_ALL_PIDS, 0, pids) == 0 && !pids.empty();
  // See the top of this file: the anchor calls probe() while fds 1 and 2 are
  // still the captured output, which is when their sockets can be named.
  remember_own_sockets();
  return 0;
}

int become_subreaper() { return -ENOSYS; }

// A kqueue with EVFILT_PROC NOTE_EXIT on `pid`: readable (poll() sees a
// kqueue's pending events) once the process exits. ESRCH when it is gone
// already.
int watch_exit(int64_t pid) {
  if (!valid_pid(pid)) return -ESRCH;
  int kq = kqueue();
  if (kq < 0) return -errno;
  fcntl(kq, F_SETFD, FD_CLOEXEC);  // kqueues are not inherited by children anyway
  struct kevent change;
  EV_SET(&change, static_cast<uintptr_t>(pid), EVFILT_PROC, EV_ADD | EV_ONESHOT, NOTE_EXIT, 0, nullptr);
  if (kevent(kq, &change, 1, nullptr, 0, nullptr) != 0) {
    int err = errno;
    close(kq);
    return -err;
  }
  return kq;
}

// Descendants of `anchor`, and the members of `group`: one listing of the
// kernel's process list (PROC_ALL_PIDS, newest first), read down to the
// anchor's own entry. Every descendant and every member of the tree's group
// was forked after the anchor, which never execs again, so each is listed
// before it (see visit_sweepable_processes); what is listed there that is
// older than the anchor (it exec'd since: at the head again) is skipped by
// its unique id. The parent each process reports then gives the
// descendants, a child accepted only where it is younger than the parent it
// names (unique ids: a recycled pid is never taken for a parent). So one walk
// of the kernel's list and one read of each process younger than the anchor,
// whatever the tree's size (a PROC_PPID_ONLY listing per member, as this was
// first written, walked the whole list once for each member: docs/xnu-model.md,
// Cost). Another user's process is read through kern.proc.pid and
// PROC_PIDUNIQIDENTIFIERINFO (read_info). A snapshot, as any walk is: a
// process forked during it is found by the next. (A member that a debugger
// outside the tree traces reports the debugger as its parent: it is found by
// the tree's group, its lineage and its marker, not by this walk.)
int list_tree(int64_t anchor, int64_t group, const std::vector<FileId>& watched,
              std::vector<Member>& out, bool commands) {
  out.clear();
  std::vector<Info> found;
  int err = 0;
  std::vector<int> pids;

  Info root;
  if (valid_pid(anchor) && read_info(anchor, true, root)) {
    err = list_pids(PROC_ALL_PIDS, 0, pids);
    std::vector<Info> young;
    for (int pid : pids) {
      if (pid == anchor) break;  // forked (and last exec'd) before the anchor from here on
      Info in;
      if (pid <= 0 || !read_info(pid, false, in)) continue;  // (zombies are not read)
      if (root.unique_id != 0 && in.unique_id != 0 && in.unique_id < root.unique_id) continue;
      young.push_back(std::move(in));
    }
    std::unordered_map<int64_t, std::vector<size_t>> children;
    for (size_t i = 0; i < young.size(); i++) children[young[i].ppid].push_back(i);
    std::vector<bool> taken(young.size(), false);
    std::vector<std::pair<int64_t, uint64_t>> queue{{anchor, root.unique_id}};
    for (size_t head = 0; head < queue.size(); head++) {
      auto kids = children.find(queue[head].first);
      if (kids == children.end()) continue;
      for (size_t i : kids->second) {
        const Info& in = young[i];
        if (taken[i] || (queue[head].second != 0 && in.unique_id != 0 && in.unique_id < queue[head].second)) continue;
        taken[i] = true;
        queue.emplace_back(in.pid, in.unique_id);
        found.push_back(in);
      }
    }
    if (group > 0) {
      for (size_t i = 0; i < young.size(); i++) {
        if (!taken[i] && young[i].pgid == group) {
          taken[i] = true;
          found.push_back(young[i]);
        }
      }
    }
  } else if (group > 0 && group <= INT_MAX) {
    // No anchor to read (gone): the group's members, as the kernel lists them.
    err = list_pids(PROC_PGRP_ONLY, static_cast<uint32_t>(group), pids);
    if (err == 0) {
      for (int pid : pids) {
        Info in;
        if (pid <= 0 || !read_info(pid, false, in) || in.pgid != group) continue;
        found.push_back(std::move(in));
      }
    }
  }
  if (found.empty() && err != 0) return -err;

  Watch w = resolve(watched);
  for (const Info& in : found) {
    Member m = identity(in);
    if (commands) m.command = command_of(in);
    m.holds_output = holds_any(in.pid, w);
    out.push_back(std::move(m));
  }
  return static_cast<int>(out.size());
}

std::string command_line(int64_t pid) {
  Info in;
  if (!read_info(pid, false, in)) return "";
  return command_of(in);
}

bool same_process_alive(int64_t pid, uint64_t start_time) {
  Info in;
  if (!read_info(pid, false, in)) return false;
  return in.start == start_time && in.status != SZOMB;
}

// XNU marks a process P_LEXIT as exit1 begins (xnu-11417 kern_exit.c:1607),
// terminates its task (:1617; task_terminate_internal clears the task's
// ipc_active, osfmk/kern/task.c:3100, ipc_tt.c:436, so kern.procargs2 answers
// EINVAL from then on, kern_sysctl.c:1459-1462) and makes it a zombie only at the end of
// proc_exit (:2612), its files closed: in between it reads as alive.
bool exiting_or_gone(int64_t pid, uint64_t start_time) {
  Info in;
  if (!read_info(pid, false, in)) return true;
  return in.start != start_time || in.status == SZOMB || in.exiting;
}

// PROC_PIDTASKALLINFO: the process's proc_bsdinfo and its task's counts in
// one answer (proc_info.c:2269-2281), for its owner or root; a zombie answers
// ESRCH (no zombie lookup for this flavor: :2143-2147). XNU marks a process
// SSTOP as the SIGSTOP is sent (kern_sig.c:2365-2367) and holds its task
// (stop(): task_suspend_internal, place_task_hold), waiting only until each
// thread is off a CPU, not until it is not runnable (task_wait_locked(task,
// FALSE), task.c:4070; osfmk/kern/sched_prim.c:1783-1784): a thread
// preempted inside a fork runs on to the end of it before its hold takes it.
// So SSTOP says nothing of the fork; pti_numrunning, the threads in TH_RUN,
// running or runnable (bsd_kern.c:1089-1091), says whether one can still
// complete it. A thread blocked inside a fork counts as not running: that
// case stays unproven on a Mac (docs/xnu-model.md).
Stillness stillness(int64_t pid, uint64_t start_time) {
  if (!valid_pid(pid)) return Stillness::kStill;
  struct proc_taskallinfo all;
  std::memset(&all, 0, sizeof all);
  errno = 0;
  int n = proc_pidinfo(static_cast<int>(pid), PROC_PIDTASKALLINFO, 0, &all, static_cast<int>(sizeof all));
  if (n != static_cast<int>(sizeof all)) return errno == ESRCH ? Stillness::kStill : Stillness::kBlocked;
  if (stamp(all.pbsd.pbi_start_tvsec, all.pbsd.pbi_start_tvusec) != start_time) return Stillness::kStill;
  if (all.pbsd.pbi_status == SZOMB) return Stillness::kStill;
  if (all.ptinfo.pti_numrunning > 0) return Stillness::kRunning;
  return all.pbsd.pbi_status == SSTOP ? Stillness::kStill : Stillness::kBlocked;
}

// list_tree already walks down from the anchor.
// (`ending` stays uncounted: no tier here reads it.)
int list_descendants(int64_t anchor, const std::vector<FileId>& watched, std::vector<Member>& out,
                     bool commands, DescendantsWalk*) {
  return list_tree(anchor, 0, watched, out, commands);
}

bool holds_output(int64_t pid, uint64_t start_time, const std::vector<FileId>& watched) {
  return same_process_alive(pid, start_time) && holds_any(pid, resolve(watched));
}

int group_live_members(int64_t group, std::vector<Member>* live) {
  if (group <= 0 || group > INT_MAX) return -EINVAL;
  if (live) live->clear();
  std::vector<int> pids;
  int e = list_pids(PROC_PGRP_ONLY, static_cast<uint32_t>(group), pids);
  if (e != 0) return -e;
  int n = 0;
  for (int pid : pids) {
    Info in;
    if (pid <= 0 || !read_info(pid, false, in) || in.pgid != group) continue;  // zombies are not read
    n++;
    if (live) live->push_back(identity(in));
  }
  return n;
}


int64_t current_pgid(int64_t pid, uint64_t start_time) {
  Info in;
  if (!read_info(pid, false, in) || in.start != start_time) return -1;
  return in.pgid;
}

int64_t session_of(int64_t pid, uint64_t start_time) {
  Info before, after;
  if (!read_info(pid, false, before) || before.start != start_time) return -1;
  pid_t sid = getsid(static_cast<pid_t>(pid));
  if (sid < 0 || !read_info(pid, false, after) || after.start != start_time) return -1;
  return sid;
}

bool is_thread_group_leader(int64_t) { return true; }  // (libproc lists processes only)

// macOS has no pidfd (use_pidfd is ignored): the member is verified, then
// signalled by pid. Residual race: between the verification below and kill()
// the process can exit, be reaped by its parent, and its pid be handed to a
// new process, which would then get the signal. macOS allocates pids
// sequentially up to 99999 before wrapping, so the number must be recycled
// within those few microseconds; capabilities() reports this tier as not
// pid-reuse safe on macOS. The tree's process group id is pinned (by the
// anchor's unreaped pin child) and signalled as a group by the anchor; this
// is for members outside the group, whose individual pids are not pinned,
// hence kill(pid) after verification. A direct, unreaped child of the calling anchor is pinned too: only
// the anchor reaps it, and not concurrently with this call.
bool is_member(int64_t anchor, int64_t group, const Member& member) {
  if (!valid_pid(member.pid)) return false;
  Info in;
  if (!read_info(member.pid, false, in)) return false;  // gone, or a zombie
  if (in.start != member.start_time) return false;      // recycled pid
  return member.from_snapshot  // verified as ours before; same process
         || in.ppid == anchor || (group > 0 && in.pgid == group) ||
         descends_from(member.pid, anchor);
}

int signal_member(int64_t anchor, int64_t group, const Member& member, int sig,
                  bool use_pidfd) {
  (void)use_pidfd;
  if (!is_member(anchor, group, member)) return -ESRCH;
  return kill(static_cast<pid_t>(member.pid), sig) == 0 ? 0 : -errno;
}

int signal_member_then_cont(int64_t anchor, int64_t group, const Member& member, int sig,
                            bool use_pidfd) {
  (void)use_pidfd;
  if (!is_member(anchor, group, member)) return -ESRCH;
  int rc = kill(static_cast<pid_t>(member.pid), sig) == 0 ? 0 : -errno;
  kill(static_cast<pid_t>(member.pid), SIGCONT);
  return rc;
}

int random_bytes(void* buf, size_t n) {
  arc4random_buf(buf, n);  // the kernel's entropy; cannot fail
  return 0;
}

uint64_t start_time_of(int64_t pid) {
  Info in;
  return read_info(pid, true, in) ? in.start : 0;
}

LineageIds lineage_ids_of(int64_t pid) {
  Info in;
  LineageIds ids;
  if (read_info(pid, false, in)) {
    ids.unique_id = in.unique_id;
    ids.id_version = in.id_version;
  }
  return ids;
}

// The kernel's order: XNU keeps its list of live processes newest first,
// each at the head since it was forked or (since macOS 13, when an exec
// builds a new proc entry: kern_proc.c pinsertchild) since it last exec'd,
// and proc_listpids copies that list from its head, zombies last. Every
// member of a tree is forked after its anchor, which never execs again: it
// is listed before the anchor's own entry, and what is listed after it was
// forked and last exec'd before the anchor. So with `since` (the anchor's
// sweeps) a walk ends there. A process older than the anchor that exec'd
// since is at the head again: its unique id (handed out in increasing order
// at fork, kept across exec: xnu-11417 kern_fork.c:988) is below the
// anchor's, and it is skipped unread. Then the listing again, each time to
// the anchor's entry: what was forked while a walk ran is at the head, and so
// is anything already visited that exec'd meanwhile (same pid and start time:
// kern_fork.c:1131-1135), which is skipped but does not end the walk. Rounds
// go on while each finds a new member (Visit::kMember): a bystander that
// forks all the while (a shell loop of the host's) cannot keep the sweep
// listing for ever, and a member's own fork during a round is at the head of
// the next listing, which that round's new member makes happen. They go on,
// too, while a process the listing had alive (before the caller's entry: the
// kernel's list of live processes, not its zombies) is gone or a zombie when
// read, or goes while the caller checks it (Visit::kGone: its environment
// could no longer be read): it may have forked after the listing and exited, and its child, a
// member if it was one, is in the next listing only (a pid hopper that hops
// between the listing and the read: then the walk would read nothing of it).
// The last round, read whole with nothing gone and no new member, is what
// makes the walk `settled`: every process alive at that listing was read
// alive, so a member alive then was seen, and any member forked since has
// a parent that was. "Nothing gone" counts only what could have been a
// member (cordon.h: `gone_matters`): on a busy host, processes newer than the
// anchor exit between a listing and their read all the time (200 trees
// released together: each anchor lists the others' dying members), and a
// process the caller already read and judged no member, or that this walk
// passed by as older than the caller or not its to signal, forks no member.
// Going alone lists again kGoneListings times at most; then the walk ends,
// unsettled.
//
// Which processes: every user's for root; else those the caller may signal
// (XNU's cansignal, kern_sig.c: the caller's real or effective uid is the
// target's real or saved uid), which includes a setuid program a member
// started. PROC_UID_ONLY would list by effective uid and miss it.
int visit_sweepable_processes(uint64_t since, const std::function<Visit(const Member&)>& visit, bool* settled,
                              const std::function<bool(int64_t)>& gone_matters) {
  if (settled) *settled = false;
  std::vector<int> pids;
  const uid_t euid = geteuid(), ruid = getuid();
  const int64_t self = getpid();
  const uint64_t self_id = since != 0 ? lineage_ids_of(self).unique_id : 0;
  auto may_signal = [&](const Info& in) {
    return euid == 0 || in.ruid == ruid || in.svuid == ruid || in.ruid == euid || in.svuid == euid;
  };
  std::set<std::pair<int64_t, uint64_t>> visited;
  // Pids this walk read and passed by unvisited (older than the caller: no
  // member; or not the caller's to signal): gone later, they had no member
  // to fork either.
  std::set<int64_t> passed;
  int n = 0;
  bool go_on = true;
  int gone_listings = 0;  // listings made again because of going alone (kGoneListings at most)
  // The last round's listing, the pids it read alive (or took as read), in
  // its order, to the caller's entry (the anchor's walks: `since`).
  std::vector<int> before, now;
  for (int round = 0; go_on && round < 8; round++) {
    int e = list_pids(PROC_ALL_PIDS, 0, pids);
    if (e != 0) return round == 0 ? -e : n;
    size_t fresh = 0;  // new members this round (Visit::kMember); others forking meanwhile do not count
    size_t gone = 0;   // listed alive, gone or a zombie when read, and possibly a member (the anchor's walks: `since`)
    // A listing again is read whole only ahead of its tail that the last
    // round read alive, in the same order: the kernel puts each fork and exec
    // at the head (xnu-11417 kern_proc.c:2539, pinsertchild's LIST_INSERT_HEAD
    // on allproc; proc_listpids copies allproc from its head, proc_info.c:405-470),
    // so the entries behind the first new one are the last
    // listing's, still the same processes (a recycled pid is a new entry, at
    // the head). Of the tail, only what could be a member is read again; what
    // the caller judged none forks no member, and what it forked since is at
    // the head. So a round reads what is new, not every process again (many
    // trees on a host: each read is a system call, and every anchor walks).
    size_t end = pids.size(), tail = pids.size();
    if (since != 0) {
      end = std::find(pids.begin(), pids.end(), static_cast<int>(self)) - pids.begin();
      tail = end;
      for (size_t j = before.size(); round > 0 && tail > 0;) {
        size_t k = j;
        while (k > 0 && before[k - 1] != pids[tail - 1]) k--;
        if (k == 0) break;
        j = k - 1;
        tail--;
      }
    }
    now.clear();
    for (size_t at = 0; at < pids.size(); at++) {
      int pid = pids[at];
      if (at == end) break;  // (the caller's entry: forked, and last exec'd, before the caller from here on)
      // Behind the new entries, one that the caller judged no member (or
      // this walk passed by) is not read again; one that could be a member
      // is (it may fork and exit after this listing: then it is gone).
      if (at >= tail && (passed.count(pid) != 0 || (gone_matters && !gone_matters(pid)))) {
        now.push_back(pid);
        continue;
      }
      if (pid == self) continue;
      Info in;
      if (pid <= 0) continue;
      if (!read_info(pid, false, in)) {  // zombies are not read
        // (Before the caller's entry: it was alive when listed.) Only one that
        // could have been a member matters: the caller judged the others.
        if (since != 0 && passed.count(pid) == 0 && (!gone_matters || gone_matters(pid))) gone++;
        continue;
      }
      now.push_back(pid);
      if (self_id != 0 && in.unique_id != 0 && in.unique_id < self_id) {  // older: exec'd since
        passed.insert(pid);
        continue;
      }
      if (!may_signal(in)) {
        passed.insert(pid);
        continue;
      }
      if (!visited.insert({in.pid, in.start}).second) continue;  // (exec'd since it was visited)
      n++;
      Visit next = visit(identity(in));
      if (next == Visit::kMember) fresh++;
      // Exited, or in exit, while the caller checked it: visited again if
      // the next listing still has it (alive or in exit: not settled yet).
      if (next == Visit::kGone) {
        gone++;
        visited.erase({in.pid, in.start});
      }
      if (!(go_on = next != Visit::kStop)) break;  // (kNotMember: nothing kept here)
    }
    before.swap(now);
    if (!go_on) break;
    if (fresh == 0 && gone == 0) {
      if (settled) *settled = true;
      break;  // no member was forked (or found) since the last listing, and nothing listed that could be one went
    }
    // Going alone lists again a few times only; then the walk ends unsettled
    // (its caller walks again later: cordon.h, kGoneListings).
    if (fresh == 0 && ++gone_listings > kGoneListings) break;
  }
  return n;
}

int list_user_processes(uint64_t since, std::vector<Member>& out) {
  out.clear();
  return visit_sweepable_processes(since, [&](const Member& m) {
    out.push_back(m);
    return Visit::kNext;
  });
}

// A cs_restricted process's environment is withheld by the kernel
// (procargs.h): -EACCES, as for any environment this caller may not read.
int read_environment(int64_t pid, uint64_t start_time, std::string& out) {
  out.clear();
  ProcEnv verdict = ProcEnv::kEmpty;
  int e = read_procargs(pid, nullptr, &out, &verdict);
  if (e == 0 && verdict == ProcEnv::kWithheld) e = EACCES;
  if (e != 0) {
    out.clear();
    return -e;
  }
  // The area read was the pid's: it is still the process listed only if its
  // start stamp is unchanged after the read.
  if (!same_process_alive(pid, start_time)) {
    out.clear();
    return -ESRCH;
  }
  return 0;
}

int count_open_fds() {
  std::vector<proc_fdinfo> fds;
  int e = list_fds(static_cast<int64_t>(getpid()), fds);
  if (e != 0) return -e;
  return static_cast<int>(fds.size());
}

// The anchor is single-threaded, so allocating in the forked child is safe.
void close_fds_from(int lowest, int keep) {
  std::vector<proc_fdinfo> fds;
  if (list_fds(static_cast<int64_t>(getpid()), fds) == 0) {
    for (const proc_fdinfo& f : fds) {
      if (f.proc_fd >= lowest && f.proc_fd != keep) close(f.proc_fd);
    }
    return;
  }
  int top = getdtablesize();
  for (int fd = lowest; fd < top; fd++) {
    if (fd != keep) close(fd);
  }
}

}  // namespace cordon
