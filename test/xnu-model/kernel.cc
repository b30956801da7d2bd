// The model of XNU's process table: a daemon that keeps, for every process
// on this Linux machine, what XNU would keep for it, and answers the calls of
// cordon's darwin code (native/darwin/tree.cc, through shim.cc) as XNU's
// would. Fed by the kernel's process events (the proc connector,
// NETLINK_CONNECTOR / CN_IDX_PROC: fork, exec, exit; root only), it keeps
// what /proc cannot say after the fact: each process's unique id, its
// parent's unique id as XNU sets it at fork and (macOS 13 and later) again at
// exec, its pid version and its parent's, its place in the kernel's list
// (ordered by last fork or exec), its parent after reparenting (launchd), and
// whether it is cs_restricted (CS_RESTRICT: set by the exec of a platform
// binary or a setuid one, kept by fork, cleared by the exec of anything
// else). What a process is now (its group, session, credentials, state,
// arguments, environment, descriptors) is read from /proc when asked.
// Every rule, with the XNU source line it follows: docs/xnu-model.md.
//
//   xnu-kernel <socket> [--release 15.4|13|11] [--platform <dirs>] [--stats <file>]
//              [--mutate exec-reset|exec-head|orig-ppidversion|restrict|in-exit]... [--third-party <program>]...
//              [--log <file>]
//
// --release picks the XNU whose rules apply: 15.4 (xnu-11417: exec resets
// the parent's unique id, p_orig_ppidversion is kept), 13 (xnu-8792: exec
// resets it, no p_orig_ppidversion), 11 (xnu-7195: exec keeps the proc, its
// ids and its place in the list). --platform: the directories whose programs
// are platform binaries (cs_restricted), ':'-separated; --third-party names
// a program there that a Mac has from a third party (the Node that runs the
// tests: Apple ships none). --mutate turns one
// rule off (a check that the model's tests see it). --log writes every
// event and every call's answer to <file>, timed (a race's record). On SIGTERM it writes
// its counters to --stats and exits. Events lost (the socket's buffer full)
// are counted, and fail the lane that started it.
//
// Test code: nothing of it ships.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "../../native/linux/internal.h"
#include "model.h"
#include "xnu.h"

namespace {

using xnu_model::Reply;
using xnu_model::Request;

// ---- settings ---------------------------------------------------------------

enum class Release { k11, k13, k15_4 };
Release g_release = Release::k15_4;
std::vector<std::string> g_platform = {"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/libexec/"};
// Programs in those directories that are third-party on a Mac (--third-party:
// the Node that runs the tests, which a Mac never has from Apple).
std::set<std::string> g_third_party;
// XNU's ARG_MAX (bsd/sys/syslimits.h: 1024 * 1024), what kern.argmax answers.
constexpr int kArgMax = 1024 * 1024;
constexpr int kLaunchd = 1;

// --mutate <rule>: one rule turned off, to check that the model's own tests
// (test/xnu-model/model.test.ts) fail without it.
std::set<std::string> g_mutations;
bool mutated(const char* rule) { return g_mutations.count(rule) != 0; }

bool exec_resets_parent() { return g_release != Release::k11 && !mutated("exec-reset"); }  // xnu-8792: kern_proc.c pinsertchild
bool exec_moves_to_head() { return g_release != Release::k11 && !mutated("exec-head"); }   // the exec's new proc: LIST_INSERT_HEAD
bool keeps_orig_ppidversion() { return g_release == Release::k15_4 && !mutated("orig-ppidversion"); }  // xnu-11417: kern_fork.c

// ---- /proc ------------------------------------------------------------------

// (The product's /proc reader: native/linux/proc.cc, linked in.)
bool read_file(const std::string& path, std::string& out, size_t limit = 1 << 22) {
  return cordon::internal::read_file(path.c_str(), out, limit);
}

struct Stat {
  char state = '?';
  int ppid = 0, pgid = 0, sid = 0, tty = 0, tpgid = 0;
  long nice = 0;
  unsigned long flags = 0;  // the task's PF_* flags
  unsigned long long start = 0;  // clock ticks since boot
  std::string comm;
};

bool read_stat(int pid, Stat& st) {
  std::string s;
  if (!read_file("/proc/" + std::to_string(pid) + "/stat", s, 1)) return false;  // (one read: the kernel makes the line at once)
  size_t open = s.find('('), close = s.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= s.size()) return false;
  st.comm = s.substr(open + 1, close - open - 1);
  // After the comm: state ppid pgrp session tty_nr tpgid flags minflt cminflt
  // majflt cmajflt utime stime cutime cstime priority nice num_threads
  // itrealvalue starttime (fields 3 to 22).
  std::vector<std::string> f;
  size_t i = close + 2;
  while (i < s.size() && f.size() < 20) {
    size_t j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    f.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  if (f.size() < 20) return false;
  st.state = f[0].empty() ? '?' : f[0][0];
  st.ppid = atoi(f[1].c_str());
  st.pgid = atoi(f[2].c_str());
  st.sid = atoi(f[3].c_str());
  st.tty = atoi(f[4].c_str());
  st.tpgid = atoi(f[5].c_str());
  st.flags = strtoul(f[6].c_str(), nullptr, 10);
  st.nice = atol(f[16].c_str());
  st.start = strtoull(f[19].c_str(), nullptr, 10);
  return true;
}

struct Creds {
  uid_t ruid = 0, euid = 0, svuid = 0;
  gid_t rgid = 0, egid = 0, svgid = 0;
  std::vector<gid_t> groups;  // the supplementary groups (Linux's Groups:)
  bool traced = false;
};

bool read_creds(int pid, Creds& c) {
  std::string s;
  // (Uid, Gid and TracerPid are in the first lines: one read.)
  if (!read_file("/proc/" + std::to_string(pid) + "/status", s, 1024)) return false;
  auto field = [&](const char* name) -> std::string {
    size_t at = s.find(std::string("\n") + name + ":");
    if (at == std::string::npos) return std::string();
    at += strlen(name) + 2;
    size_t end = s.find('\n', at);
    return s.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  unsigned a = 0, b = 0, d = 0;
  if (sscanf(field("Uid").c_str(), "%u %u %u", &a, &b, &d) != 3) return false;
  c.ruid = a, c.euid = b, c.svuid = d;
  if (sscanf(field("Gid").c_str(), "%u %u %u", &a, &b, &d) != 3) return false;
  c.rgid = a, c.egid = b, c.svgid = d;
  c.traced = atoi(field("TracerPid").c_str()) != 0;
  c.groups.clear();
  std::string groups = field("Groups");
  int used = 0;
  for (const char* q = groups.c_str(); sscanf(q, "%u%n", &a, &used) == 1; q += used) c.groups.push_back(a);
  return true;
}

std::string exe_of(int pid) {
  char buf[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), buf, sizeof buf - 1);
  if (n <= 0) return std::string();
  std::string path(buf, static_cast<size_t>(n));
  const char kDeleted[] = " (deleted)";
  if (path.size() > sizeof kDeleted && path.compare(path.size() - (sizeof kDeleted - 1), std::string::npos, kDeleted) == 0)
    path.resize(path.size() - (sizeof kDeleted - 1));
  return path;
}

// CS_RESTRICT at exec: XNU takes it from the binary's code signature
// (kern_exec.c:1631) or from the MAC policy's label update at exec
// (kern_exec.c:7009, AMFI): Apple's platform binaries under SIP and setuid
// programs (docs/xnu-model.md). The model: a program in a platform
// directory, or one with the setuid or setgid bit.
bool restricted_program(const std::string& exe) {
  if (exe.empty() || mutated("restrict") || g_third_party.count(exe) != 0) return false;
  for (const std::string& dir : g_platform) {
    if (exe.compare(0, dir.size(), dir) == 0) return true;
  }
  struct stat sb;
  return stat(exe.c_str(), &sb) == 0 && (sb.st_mode & (S_ISUID | S_ISGID)) != 0;
}

uint64_t now_us() {
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  return static_cast<uint64_t>(tv.tv_sec) * 1000000ull + static_cast<uint64_t>(tv.tv_usec);
}

// ---- the table --------------------------------------------------------------

struct Proc {
  int pid = 0;
  unsigned long long lstart = 0;  // Linux's start (ticks): which process on this pid the record is of
  uint64_t uniqueid = 0;          // p_uniqueid: ++nextuniqueid at fork (kern_fork.c:988), kept across exec
  uint64_t puniqueid = 0;         // p_puniqueid: the parent's, at fork and (13+) at exec (kern_proc.c:2525)
  int32_t idversion = 0;          // p_idversion: ++nextpidversion at fork (kern_fork.c:987), kept across exec
  int32_t orig_ppidversion = 0;   // p_orig_ppidversion (15.4+): the parent's idversion at fork (kern_fork.c:991)
  int ppid = 0;                   // p_ppid: the parent, launchd once the parent exited (kern_exit.c)
  uint64_t start_us = 0;          // p_start: microtime at fork (kern_fork.c:1138), kept across exec
  uint64_t seq = 0;               // place in allproc: the last LIST_INSERT_HEAD (fork, or exec 13+)
  bool restricted = false;        // CS_RESTRICT
  bool zombie = false;
  uint64_t zseq = 0;              // place in zombproc
  std::string comm;               // p_comm / p_name
  std::string exe;
  // Its credentials as /proc last said, until an event says they changed
  // (setuid, setgid, an exec, a ptrace attach or detach).
  bool creds_known = false;
  Creds creds;
};

std::unordered_map<int, Proc> g_procs;

// --log <file>: every event and every answer, one line each, with the wall
// clock in microseconds (the anchor's trace, CORDON_TRACE, uses the same
// clock), to tell what the table held when a call was answered.
FILE* g_log = nullptr;
void log_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_line(const char* fmt, ...) {
  if (!g_log) return;
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  fprintf(g_log, "%lld.%06lld ", static_cast<long long>(tv.tv_sec), static_cast<long long>(tv.tv_usec));
  va_list ap;
  va_start(ap, fmt);
  vfprintf(g_log, fmt, ap);
  va_end(ap);
  fputc('\n', g_log);
}
uint64_t g_seq = 0;
uint64_t g_nextuniqueid = 0;
int32_t g_nextpidversion = 0;
uint64_t g_last_start_us = 0;

// Counters (kStats).
struct Counters {
  uint64_t events = 0, forks = 0, execs = 0, exits = 0, lost = 0, reparented = 0;
  uint64_t restricted_execs = 0, resets = 0;
  uint64_t calls[16][32] = {};  // by op, and by flavor (or list type) for those that take one
  uint64_t listpids_walked = 0;  // processes the kernel's list walks went through (proc_listpids)
  uint64_t listpids_returned = 0;
} g_count;

uint64_t start_stamp() {
  uint64_t t = now_us();
  if (t <= g_last_start_us) t = g_last_start_us + 1;
  g_last_start_us = t;
  return t;
}

uint64_t uniqueid_of(int pid) {
  auto it = g_procs.find(pid);
  return it == g_procs.end() ? 0 : it->second.uniqueid;
}

// The record of `pid` if it is still that process (its /proc entry has the
// start the record has); a record whose process is gone (reaped) goes.
Proc* lookup(int pid, Stat* st = nullptr) {
  auto it = g_procs.find(pid);
  if (it == g_procs.end()) return nullptr;
  Stat s;
  if (!read_stat(pid, s) || (it->second.lstart != 0 && s.start != it->second.lstart)) {
    g_procs.erase(it);
    return nullptr;
  }
  if (it->second.lstart == 0) it->second.lstart = s.start;
  if (st) *st = s;
  return &it->second;
}

void on_fork(int parent, int child) {
  g_count.forks++;
  Proc p;
  p.pid = child;
  p.uniqueid = ++g_nextuniqueid;
  p.idversion = ++g_nextpidversion;
  p.start_us = start_stamp();
  p.seq = ++g_seq;
  p.ppid = parent;
  Stat st;
  if (read_stat(child, st)) p.lstart = st.start;
  auto par = g_procs.find(parent);
  if (par != g_procs.end()) {
    p.puniqueid = par->second.uniqueid;
    if (keeps_orig_ppidversion()) p.orig_ppidversion = par->second.idversion;
    p.restricted = par->second.restricted;  // kern_fork.c:1092: p_csflags copied
    p.comm = par->second.comm;
    p.exe = par->second.exe;
  } else {
    p.comm = st.comm;
  }
  g_procs[child] = p;
}

void on_exec(int pid) {
  g_count.execs++;
  auto it = g_procs.find(pid);
  if (it == g_procs.end()) return;
  Proc& p = it->second;
  if (exec_resets_parent()) {
    uint64_t now_parent = uniqueid_of(p.ppid);
    if (now_parent != p.puniqueid) g_count.resets++;
    p.puniqueid = now_parent;
  }
  if (exec_moves_to_head()) p.seq = ++g_seq;
  p.creds_known = false;
  p.exe = exe_of(pid);
  p.restricted = restricted_program(p.exe);
  if (p.restricted) g_count.restricted_execs++;
  Stat st;
  if (read_stat(pid, st)) p.comm = st.comm;
}

void on_exit(int pid) {
  g_count.exits++;
  auto it = g_procs.find(pid);
  if (it == g_procs.end()) return;
  it->second.zombie = true;
  it->second.zseq = ++g_seq;
  // proc_exit: its children go to launchd (proc_reparentlocked to initproc).
  for (auto& e : g_procs) {
    if (e.second.ppid == pid && e.first != pid) {
      e.second.ppid = kLaunchd;
      g_count.reparented++;
    }
  }
}

// What the table starts from: every process now, oldest first, each one's
// ids in that order, its parent's as it is now.
void bootstrap() {
  struct Entry {
    int pid;
    Stat st;
  };
  std::vector<Entry> all;
  if (DIR* d = opendir("/proc")) {
    while (struct dirent* e = readdir(d)) {
      char* end = nullptr;
      long pid = strtol(e->d_name, &end, 10);
      if (!end || *end || pid <= 0) continue;
      Entry en{static_cast<int>(pid), Stat()};
      if (read_stat(en.pid, en.st)) all.push_back(en);
    }
    closedir(d);
  }
  std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) {
    return a.st.start != b.st.start ? a.st.start < b.st.start : a.pid < b.pid;
  });
  long hz = sysconf(_SC_CLK_TCK);
  struct timespec boot;
  clock_gettime(CLOCK_BOOTTIME, &boot);
  uint64_t boot_us = now_us() - (static_cast<uint64_t>(boot.tv_sec) * 1000000ull + static_cast<uint64_t>(boot.tv_nsec) / 1000);
  for (const Entry& en : all) {
    Proc p;
    p.pid = en.pid;
    p.lstart = en.st.start;
    p.uniqueid = ++g_nextuniqueid;
    p.idversion = ++g_nextpidversion;
    p.start_us = boot_us + en.st.start * (1000000ull / static_cast<uint64_t>(hz > 0 ? hz : 100)) + static_cast<uint64_t>(en.pid % 1000);
    g_last_start_us = std::max(g_last_start_us, p.start_us);
    p.seq = ++g_seq;
    p.ppid = en.st.ppid;
    p.zombie = en.st.state == 'Z' || en.st.state == 'X';
    p.comm = en.st.comm;
    p.exe = exe_of(en.pid);
    p.restricted = restricted_program(p.exe);
    g_procs[en.pid] = p;
  }
  for (auto& e : g_procs) {
    auto par = g_procs.find(e.second.ppid);
    if (par == g_procs.end()) continue;
    e.second.puniqueid = par->second.uniqueid;
    if (keeps_orig_ppidversion()) e.second.orig_ppidversion = par->second.idversion;
  }
}

void forget_creds(int pid) {
  auto it = g_procs.find(pid);
  if (it != g_procs.end()) it->second.creds_known = false;
}

// The credentials of the process `p` records, read once until an event says
// they changed; false when its /proc entry is gone.
bool creds_of(Proc& p, Creds& c) {
  if (!p.creds_known) {
    if (!read_creds(p.pid, p.creds)) return false;
    p.creds_known = true;
  }
  c = p.creds;
  return true;
}

// ---- the proc connector -----------------------------------------------------

int g_netlink = -1;

int open_connector() {
  int s = socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);
  if (s < 0) return -errno;
  int size = 64 << 20;
  if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0) setsockopt(s, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  struct sockaddr_nl addr;
  memset(&addr, 0, sizeof addr);
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = CN_IDX_PROC;
  addr.nl_pid = 0;  // the kernel assigns one
  if (bind(s, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    close(s);
    return -err;
  }
  char buf[NLMSG_SPACE(sizeof(struct cn_msg) + sizeof(int))];
  memset(buf, 0, sizeof buf);
  struct nlmsghdr* nh = reinterpret_cast<struct nlmsghdr*>(buf);
  nh->nlmsg_len = NLMSG_LENGTH(sizeof(struct cn_msg) + sizeof(int));
  nh->nlmsg_type = NLMSG_DONE;
  struct cn_msg* msg = static_cast<struct cn_msg*>(NLMSG_DATA(nh));
  msg->id.idx = CN_IDX_PROC;
  msg->id.val = CN_VAL_PROC;
  msg->len = sizeof(int);
  int op = PROC_CN_MCAST_LISTEN;
  memcpy(msg->data, &op, sizeof op);
  if (send(s, nh, nh->nlmsg_len, 0) < 0) {
    int err = errno;
    close(s);
    return -err;
  }
  return s;
}

// Everything the kernel has queued: whatever happened before a request was
// sent (a fork's event is queued before fork() returns, an exec's before the
// new image runs, an exit's before the parent can reap) is in the table when
// it is answered.
void drain() {
  alignas(struct nlmsghdr) char buf[1 << 16];
  for (;;) {
    ssize_t n = recv(g_netlink, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        g_count.lost++;
        fprintf(stderr, "xnu-kernel: events lost (ENOBUFS): the model is no longer XNU's table\n");
        continue;
      }
      return;  // EAGAIN
    }
    for (struct nlmsghdr* nh = reinterpret_cast<struct nlmsghdr*>(buf); NLMSG_OK(nh, static_cast<unsigned>(n));
         nh = NLMSG_NEXT(nh, n)) {
      if (nh->nlmsg_type == NLMSG_NOOP || nh->nlmsg_type == NLMSG_ERROR) continue;
      struct cn_msg* msg = static_cast<struct cn_msg*>(NLMSG_DATA(nh));
      if (msg->id.idx != CN_IDX_PROC || msg->id.val != CN_VAL_PROC) continue;
      struct proc_event* ev = reinterpret_cast<struct proc_event*>(msg->data);
      g_count.events++;
      switch (ev->what) {
        case proc_event::PROC_EVENT_FORK:
          if (ev->event_data.fork.child_pid == ev->event_data.fork.child_tgid) {  // a process, not a thread
            on_fork(ev->event_data.fork.parent_tgid, ev->event_data.fork.child_tgid);
            log_line("fork %d %d (event at %llu ns)", ev->event_data.fork.parent_tgid, ev->event_data.fork.child_tgid,
                     static_cast<unsigned long long>(ev->timestamp_ns));
          }
          break;
        case proc_event::PROC_EVENT_EXEC:
          on_exec(ev->event_data.exec.process_tgid);
          log_line("exec %d", ev->event_data.exec.process_tgid);
          break;
        case proc_event::PROC_EVENT_EXIT:
          if (ev->event_data.exit.process_pid == ev->event_data.exit.process_tgid) {
            on_exit(ev->event_data.exit.process_tgid);
            log_line("exit %d (event at %llu ns)", ev->event_data.exit.process_tgid, static_cast<unsigned long long>(ev->timestamp_ns));
          }
          break;
        case proc_event::PROC_EVENT_UID:
        case proc_event::PROC_EVENT_GID:
          forget_creds(ev->event_data.id.process_tgid);
          break;
        case proc_event::PROC_EVENT_PTRACE:
          forget_creds(ev->event_data.ptrace.process_tgid);
          break;
        default:
          break;
      }
    }
  }
}

// ---- answers ----------------------------------------------------------------

struct Answer {
  int error = 0;
  int value = 0;
  std::string data;
};

bool is_root(const Request& r) { return r.euid == 0; }

// proc_security_policy with CHECK_SAME_USER (proc_info.c:3157): the caller's
// uid (effective) must be the target's, unless it may read every process's
// (root).
bool same_user_ok(const Request& r, Proc& p) {
  if (is_root(r)) return true;
  Creds c;
  return creds_of(p, c) && c.euid == r.euid;
}

// allproc newest first (fork, or exec 13+), then zombproc newest first
// (proc_info.c proc_listpids).
std::vector<Proc*> kernel_list() {
  // Zombies reaped since (their /proc entry is gone) leave the table first.
  std::vector<int> reaped;
  for (auto& e : g_procs) {
    struct stat sb;
    if (e.second.zombie && stat(("/proc/" + std::to_string(e.first)).c_str(), &sb) != 0) reaped.push_back(e.first);
  }
  for (int pid : reaped) g_procs.erase(pid);
  std::vector<Proc*> live, dead;
  for (auto& e : g_procs) (e.second.zombie ? dead : live).push_back(&e.second);
  std::sort(live.begin(), live.end(), [](Proc* a, Proc* b) { return a->seq > b->seq; });
  std::sort(dead.begin(), dead.end(), [](Proc* a, Proc* b) { return a->zseq > b->zseq; });
  live.insert(live.end(), dead.begin(), dead.end());
  return live;
}

Answer list_pids(const Request& r) {
  Answer a;
  int nprocs = 0;
  for (auto& e : g_procs) nprocs += e.second.zombie ? 0 : 1;
  a.value = (nprocs + 20) * static_cast<int>(sizeof(int));
  if (r.size == 0) return a;
  if (r.size < sizeof(int)) {
    a.error = ENOMEM;
    return a;
  }
  size_t want = std::min<size_t>(r.size / sizeof(int), static_cast<size_t>(nprocs + 20));
  std::vector<int> out;
  std::vector<int> gone;
  for (Proc* p : kernel_list()) {
    g_count.listpids_walked++;
    bool skip = false;
    Stat st;
    Creds c;
    bool have = true;
    switch (r.a) {
      case PROC_ALL_PIDS:
        break;
      case PROC_PGRP_ONLY:
        have = read_stat(p->pid, st);
        skip = !have || st.pgid != static_cast<int>(r.b);
        break;
      case PROC_PPID_ONLY:
        skip = p->ppid != static_cast<int>(r.b);
        break;
      case PROC_UID_ONLY:
        have = creds_of(*p, c);
        skip = !have || c.euid != r.b;
        break;
      case PROC_RUID_ONLY:
        have = creds_of(*p, c);
        skip = !have || c.ruid != r.b;
        break;
      default:
        skip = true;
    }
    if (!have) {
      gone.push_back(p->pid);  // reaped since its exit's event: no longer listed
      continue;
    }
    if (skip) continue;
    out.push_back(p->pid);
    if (out.size() >= want) break;
  }
  for (int pid : gone) lookup(pid);
  g_count.listpids_returned += out.size();
  a.data.assign(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(int));
  return a;
}

// A process in exit: XNU sets P_LEXIT in exit1 (kern_exit.c:1607), then
// terminates the task (:1617; from then on kern.procargs2 answers EINVAL, the
// task no longer IPC-active: kern_sysctl.c:1459-1462), and the process is a
// zombie only at the end of proc_exit (:2612), after its files are closed.
// Meanwhile proc_pidinfo says PROC_FLAG_INEXIT (proc_info.c:717-718,
// :825-826) and kern.proc.pid P_WEXIT (kern_sysctl.c:1141-1142). The model:
// Linux's PF_EXITING (set as do_exit begins, before the memory, and so the
// argument area, is dropped), until the exit's event.
constexpr unsigned long kPfExiting = 0x4;
bool in_exit(const Proc& p, const Stat& st) { return !p.zombie && (st.flags & kPfExiting) != 0 && !mutated("in-exit"); }

void fill_bsdinfo(const Proc& p, const Stat& st, const Creds& c, struct proc_bsdinfo& bi) {
  memset(&bi, 0, sizeof bi);
  bi.pbi_flags = (c.traced ? PROC_FLAG_TRACED : 0) | (st.sid == p.pid ? PROC_FLAG_SLEADER : 0) | (st.tty != 0 ? PROC_FLAG_CTTY : 0) |
                 (in_exit(p, st) ? PROC_FLAG_INEXIT : 0);
  bi.pbi_status = p.zombie ? SZOMB : (st.state == 'T' || st.state == 't') ? SSTOP : (st.state == 'R' ? SRUN : SSLEEP);
  bi.pbi_pid = static_cast<uint32_t>(p.pid);
  bi.pbi_ppid = static_cast<uint32_t>(p.ppid);
  bi.pbi_uid = c.euid;
  bi.pbi_gid = c.egid;
  bi.pbi_ruid = c.ruid;
  bi.pbi_rgid = c.rgid;
  bi.pbi_svuid = c.svuid;
  bi.pbi_svgid = c.svgid;
  memcpy(bi.pbi_comm, p.comm.data(), std::min(p.comm.size(), sizeof bi.pbi_comm));
  memcpy(bi.pbi_name, p.comm.data(), std::min(p.comm.size(), sizeof bi.pbi_name));
  bi.pbi_pgid = static_cast<uint32_t>(st.pgid);
  bi.e_tdev = static_cast<uint32_t>(st.tty);
  bi.e_tpgid = static_cast<uint32_t>(st.tpgid);
  bi.pbi_nice = static_cast<int32_t>(st.nice);
  bi.pbi_start_tvsec = p.start_us / 1000000ull;
  bi.pbi_start_tvusec = p.start_us % 1000000ull;
}

void fill_uniq(const Proc& p, struct proc_uniqidentifierinfo& u) {
  memset(&u, 0, sizeof u);
  u.p_uniqueid = p.uniqueid;
  u.p_puniqueid = p.puniqueid;
  u.p_idversion = p.idversion;
  u.p_orig_ppidversion = p.orig_ppidversion;
}

struct FdEntry {
  int fd;
  uint32_t type;
  uint64_t ino;
};

std::vector<FdEntry> fds_of(int pid, bool& ok) {
  std::vector<FdEntry> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  ok = d != nullptr;
  if (!d) return out;
  while (struct dirent* e = readdir(d)) {
    char* end = nullptr;
    long fd = strtol(e->d_name, &end, 10);
    if (!end || *end || e->d_name[0] == '\0') continue;
    char link[4096];
    ssize_t n = readlink((dir + "/" + e->d_name).c_str(), link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    FdEntry f{static_cast<int>(fd), PROX_FDTYPE_VNODE, 0};
    unsigned long long ino = 0;
    if (sscanf(link, "pipe:[%llu]", &ino) == 1) {
      f.type = PROX_FDTYPE_PIPE;
    } else if (sscanf(link, "socket:[%llu]", &ino) == 1) {
      f.type = PROX_FDTYPE_SOCKET;
    } else if (strncmp(link, "anon_inode:", 11) == 0) {
      f.type = PROX_FDTYPE_KQUEUE;  // (eventfd, epoll, pidfd: what a kqueue is to XNU)
    }
    f.ino = ino;
    out.push_back(f);
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const FdEntry& a, const FdEntry& b) { return a.fd < b.fd; });
  return out;
}

// XNU names a socket to proc_pidfdinfo by soi_so, a hash of its address
// (VM_KERNEL_ADDRHASH), and fstat() by a lazily numbered fake inode: they
// never agree. The model's soi_so is a hash of the inode, so neither does it.
uint64_t socket_handle(uint64_t ino) { return (ino * 0x9E3779B97F4A7C15ull) ^ 0xC0FFEEull; }

bool unix_socket(uint64_t ino) {
  std::string s;
  if (!read_file("/proc/net/unix", s)) return false;
  std::string needle = " " + std::to_string(ino);
  size_t at = 0;
  while ((at = s.find(needle, at)) != std::string::npos) {
    size_t end = at + needle.size();
    if (end == s.size() || s[end] == ' ' || s[end] == '\n') return true;
    at = end;
  }
  return false;
}

// A process's threads, and those running or runnable (Linux's R), from
// /proc/<pid>/task/<tid>/stat.
void count_threads(int pid, int32_t& threads, int32_t& running) {
  threads = running = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::string text;
    if (!read_file(dir + "/" + e->d_name + "/stat", text)) continue;
    size_t paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 >= text.size()) continue;
    threads++;
    if (text[paren + 2] == 'R') running++;
  }
  closedir(d);
}

Answer pid_info(const Request& r) {
  Answer a;
  int flavor = static_cast<int>(r.a);
  size_t size = 0;
  bool findzomb = false, check_same_user = true;
  switch (flavor) {
    case PROC_PIDLISTFDS: size = r.size == 0 ? 0 : sizeof(struct proc_fdinfo); break;
    case PROC_PIDTBSDINFO: size = sizeof(struct proc_bsdinfo); break;
    case PROC_PIDTASKALLINFO: size = sizeof(struct proc_taskallinfo); break;
    case PROC_PIDT_SHORTBSDINFO: size = sizeof(struct proc_bsdshortinfo); check_same_user = false; break;
    case PROC_PIDUNIQIDENTIFIERINFO: size = sizeof(struct proc_uniqidentifierinfo); check_same_user = false; break;
    case PROC_PIDT_BSDINFOWITHUNIQID: size = sizeof(struct proc_bsdinfo) + sizeof(struct proc_uniqidentifierinfo); break;
    default: a.error = EINVAL; return a;
  }
  if (r.size < size) {
    a.error = ENOMEM;
    return a;
  }
  if (flavor != PROC_PIDLISTFDS && flavor != PROC_PIDTASKALLINFO && r.c != 0) findzomb = true;
  Stat st;
  Proc* p = lookup(r.pid, &st);
  if (!p || (p->zombie && !findzomb)) {
    a.error = ESRCH;
    return a;
  }
  if (check_same_user && !same_user_ok(r, *p)) {
    a.error = EPERM;
    return a;
  }
  Creds c;
  creds_of(*p, c);
  switch (flavor) {
    case PROC_PIDLISTFDS: {
      bool ok = false;
      std::vector<FdEntry> fds = fds_of(r.pid, ok);
      if (r.size == 0) {
        a.value = static_cast<int>((fds.size() + 20) * sizeof(struct proc_fdinfo));
        return a;
      }
      size_t n = std::min<size_t>(fds.size(), r.size / sizeof(struct proc_fdinfo));
      for (size_t i = 0; i < n; i++) {
        struct proc_fdinfo fi = {fds[i].fd, fds[i].type};
        a.data.append(reinterpret_cast<const char*>(&fi), sizeof fi);
      }
      return a;
    }
    case PROC_PIDTBSDINFO: {
      struct proc_bsdinfo bi;
      fill_bsdinfo(*p, st, c, bi);
      a.data.assign(reinterpret_cast<const char*>(&bi), sizeof bi);
      return a;
    }
    case PROC_PIDTASKALLINFO: {
      // The task's threads: pti_numrunning counts those in TH_RUN, running
      // or runnable (bsd_kern.c:1089-1091): here Linux's R.
      struct proc_taskallinfo all;
      memset(&all, 0, sizeof all);
      fill_bsdinfo(*p, st, c, all.pbsd);
      count_threads(r.pid, all.ptinfo.pti_threadnum, all.ptinfo.pti_numrunning);
      a.data.assign(reinterpret_cast<const char*>(&all), sizeof all);
      return a;
    }
    case PROC_PIDT_SHORTBSDINFO: {
      struct proc_bsdinfo bi;
      fill_bsdinfo(*p, st, c, bi);
      struct proc_bsdshortinfo s;
      memset(&s, 0, sizeof s);
      s.pbsi_pid = bi.pbi_pid;
      s.pbsi_ppid = bi.pbi_ppid;
      s.pbsi_pgid = bi.pbi_pgid;
      s.pbsi_status = bi.pbi_status;
      memcpy(s.pbsi_comm, bi.pbi_comm, sizeof s.pbsi_comm);
      s.pbsi_flags = bi.pbi_flags;
      s.pbsi_uid = c.euid;
      s.pbsi_gid = c.egid;
      s.pbsi_ruid = c.ruid;
      s.pbsi_rgid = c.rgid;
      s.pbsi_svuid = c.svuid;
      s.pbsi_svgid = c.svgid;
      a.data.assign(reinterpret_cast<const char*>(&s), sizeof s);
      return a;
    }
    case PROC_PIDUNIQIDENTIFIERINFO: {
      struct proc_uniqidentifierinfo u;
      fill_uniq(*p, u);
      a.data.assign(reinterpret_cast<const char*>(&u), sizeof u);
      return a;
    }
    case PROC_PIDT_BSDINFOWITHUNIQID: {
      struct proc_bsdinfo bi;
      fill_bsdinfo(*p, st, c, bi);
      struct proc_uniqidentifierinfo u;
      fill_uniq(*p, u);
      a.data.assign(reinterpret_cast<const char*>(&bi), sizeof bi);
      a.data.append(reinterpret_cast<const char*>(&u), sizeof u);
      return a;
    }
  }
  a.error = EINVAL;
  return a;
}

Answer pid_fd_info(const Request& r) {
  Answer a;
  Proc* p = lookup(r.pid);
  if (!p || p->zombie) {
    a.error = ESRCH;
    return a;
  }
  if (!same_user_ok(r, *p)) {
    a.error = EPERM;
    return a;
  }
  bool ok = false;
  std::vector<FdEntry> fds = fds_of(r.pid, ok);
  const FdEntry* f = nullptr;
  for (const FdEntry& e : fds) {
    if (e.fd == static_cast<int>(r.a)) f = &e;
  }
  if (!f) {
    a.error = EBADF;
    return a;
  }
  // The flavor asks for one kind of descriptor, and a buffer of its size.
  int flavor = static_cast<int>(r.b);
  auto fits = [&](uint32_t type, size_t size) {
    if (f->type == type && r.size >= size) return true;
    a.error = f->type != type ? EBADF : ENOMEM;
    return false;
  };
  if (flavor == PROC_PIDFDPIPEINFO) {
    if (!fits(PROX_FDTYPE_PIPE, sizeof(struct pipe_fdinfo))) return a;
    struct pipe_fdinfo pi;
    memset(&pi, 0, sizeof pi);
    pi.pipeinfo.pipe_handle = f->ino;  // what fstat's st_ino is for a pipe (the shim's fstat: dev 0)
    a.data.assign(reinterpret_cast<const char*>(&pi), sizeof pi);
  } else if (flavor == PROC_PIDFDSOCKETINFO) {
    if (!fits(PROX_FDTYPE_SOCKET, sizeof(struct socket_fdinfo))) return a;
    struct socket_fdinfo si;
    memset(&si, 0, sizeof si);  // soi_stat: never filled (XNU)
    si.psi.soi_so = socket_handle(f->ino);
    si.psi.soi_family = unix_socket(f->ino) ? AF_UNIX : AF_INET;
    a.data.assign(reinterpret_cast<const char*>(&si), sizeof si);
  } else if (flavor == PROC_PIDFDVNODEINFO) {
    if (!fits(PROX_FDTYPE_VNODE, sizeof(struct vnode_fdinfo))) return a;
    struct stat sb;
    std::string path = "/proc/" + std::to_string(r.pid) + "/fd/" + std::to_string(f->fd);
    if (stat(path.c_str(), &sb) != 0) {
      a.error = EBADF;
      return a;
    }
    struct vnode_fdinfo vi;
    memset(&vi, 0, sizeof vi);
    vi.pvi.vi_stat.vst_dev = static_cast<uint32_t>(sb.st_dev);
    vi.pvi.vi_stat.vst_ino = sb.st_ino;
    vi.pvi.vi_stat.vst_mode = static_cast<uint16_t>(sb.st_mode);
    a.data.assign(reinterpret_cast<const char*>(&vi), sizeof vi);
  } else {
    a.error = EINVAL;
  }
  return a;
}

Answer pid_path(const Request& r) {
  Answer a;
  Proc* p = lookup(r.pid);
  if (!p || p->zombie) {
    a.error = ESRCH;
    return a;
  }
  std::string exe = exe_of(r.pid);
  if (exe.size() + 1 > r.size) {
    a.error = ENOMEM;
    return a;
  }
  a.data = exe;
  a.data.push_back('\0');
  return a;
}

// kern.proc.pid (kern_sysctl.c sysctl_prochandle): no permission check,
// zombies included; a pid with no process answers nothing (length 0).
Answer proc_pid(const Request& r) {
  Answer a;
  Stat st;
  Proc* p = lookup(r.pid, &st);
  if (!p) return a;
  Creds c;
  creds_of(*p, c);
  struct kinfo_proc kp;
  memset(&kp, 0, sizeof kp);
  kp.kp_proc.p_starttime.tv_sec = static_cast<time_t>(p->start_us / 1000000ull);
  kp.kp_proc.p_starttime.tv_usec = static_cast<suseconds_t>(p->start_us % 1000000ull);
  kp.kp_proc.p_flag = (c.traced ? P_TRACED : 0) | (in_exit(*p, st) ? P_WEXIT : 0);
  kp.kp_proc.p_stat = static_cast<char>(p->zombie ? SZOMB : (st.state == 'T' || st.state == 't') ? SSTOP : SRUN);
  kp.kp_proc.p_pid = p->pid;
  strncpy(kp.kp_proc.p_comm, p->comm.c_str(), MAXCOMLEN);
  kp.kp_eproc.e_ppid = p->ppid;
  kp.kp_eproc.e_pgid = st.pgid;
  kp.kp_eproc.e_ucred.cr_uid = c.euid;
  kp.kp_eproc.e_pcred.p_ruid = c.ruid;
  kp.kp_eproc.e_pcred.p_svuid = c.svuid;
  kp.kp_eproc.e_pcred.p_rgid = c.rgid;
  kp.kp_eproc.e_pcred.p_svgid = c.svgid;
  // (XNU's posix credential: the effective gid first, then the groups
  // setgroups gave, NGROUPS in all: xnu-11417 kern_sysctl.c:1099-1101,
  // kern_credential.c:2990.)
  kp.kp_eproc.e_ucred.cr_groups[0] = c.egid;
  short n = 1;
  for (gid_t g : c.groups) {
    if (n == NGROUPS) break;
    kp.kp_eproc.e_ucred.cr_groups[n++] = g;
  }
  kp.kp_eproc.e_ucred.cr_ngroups = n;
  a.data.assign(reinterpret_cast<const char*>(&kp), sizeof kp);
  return a;
}

// kern.procargs2 (kern_sysctl.c sysctl_procargsx, :1323): the process's
// argument area as it is now (/proc/<pid>/cmdline and environ are that
// memory too), laid out as exec_copyout_strings leaves it: argc, the exec
// path (its "executable_path=" prefix cut), NULs to pointer alignment, argv,
// the environment, NULs, the apple[] strings. The environment is left out
// when the target is cs_restricted and not the caller (:1389-1398), and
// everything for another uid's process unless the caller is root (:1446).
Answer proc_args2(const Request& r) {
  Answer a;
  Proc* p = lookup(r.pid);
  if (!p || p->zombie || r.size == 0 || r.size > static_cast<uint32_t>(kArgMax)) {
    a.error = EINVAL;
    return a;
  }
  bool omit_env = p->restricted && r.pid != r.caller;
  Creds c;
  if (!creds_of(*p, c) || (c.euid != r.euid && !is_root(r))) {
    a.error = EINVAL;
    return a;
  }
  std::string cmdline, environ_;
  std::string base = "/proc/" + std::to_string(r.pid);
  if (!read_file(base + "/cmdline", cmdline) || !read_file(base + "/environ", environ_)) {
    a.error = EINVAL;
    return a;
  }
  if (cmdline.empty()) {  // a kernel thread: no user stack
    a.error = EINVAL;
    return a;
  }
  if (!cmdline.empty() && cmdline.back() != '\0') cmdline.push_back('\0');
  int argc = static_cast<int>(std::count(cmdline.begin(), cmdline.end(), '\0'));
  std::string area = "executable_path=" + (p->exe.empty() ? exe_of(r.pid) : p->exe);
  area.push_back('\0');
  while (area.size() % 8 != 0) area.push_back('\0');
  size_t argv_end = area.size() + cmdline.size();
  area += cmdline;
  if (!omit_env) {
    area += environ_;
    while (area.size() % 8 != 0) area.push_back('\0');
    static const char kApple[] =
        "ptr_munge=\0main_stack=\0executable_file=0x1a01000010,0x2f1c3\0dyld_file=0x1a01000010,0x3e2a1\0"
        "executable_cdhash=0\0th_port=0x103";
    area.append(kApple, sizeof kApple);
  } else {
    area.resize(argv_end);
  }
  std::string strings = area.substr(16);  // sizeof "executable_path=" - 1
  if (strings.size() > r.size - sizeof(int)) strings = strings.substr(strings.size() - (r.size - sizeof(int)));
  a.data.assign(reinterpret_cast<const char*>(&argc), sizeof argc);
  a.data += strings;
  return a;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", ch);
      o += b;
    } else {
      o += ch;
    }
  }
  return o;
}

std::string stats_json() {
  std::string s = "{\"release\":\"";
  s += g_release == Release::k11 ? "11" : g_release == Release::k13 ? "13" : "15.4";
  s += "\",\"mutations\":\"";
  for (const std::string& m : g_mutations) s += m + " ";
  char b[512];
  snprintf(b, sizeof b,
           "\",\"events\":%llu,\"forks\":%llu,\"execs\":%llu,\"exits\":%llu,\"lost\":%llu,\"reparented\":%llu,"
           "\"restrictedExecs\":%llu,\"parentResets\":%llu,\"listpidsWalked\":%llu,\"listpidsReturned\":%llu,\"processes\":%zu,\"calls\":{",
           (unsigned long long)g_count.events, (unsigned long long)g_count.forks, (unsigned long long)g_count.execs,
           (unsigned long long)g_count.exits, (unsigned long long)g_count.lost, (unsigned long long)g_count.reparented,
           (unsigned long long)g_count.restricted_execs, (unsigned long long)g_count.resets,
           (unsigned long long)g_count.listpids_walked, (unsigned long long)g_count.listpids_returned, g_procs.size());
  s += b;
  static const char* const kNames[] = {"", "listpids", "pidinfo", "pidfdinfo", "pidpath", "kern.proc.pid", "kern.procargs2", "find", "stats", "model"};
  bool first = true;
  for (size_t op = 1; op < sizeof kNames / sizeof kNames[0]; op++) {
    for (size_t k = 0; k < 32; k++) {
      if (g_count.calls[op][k] == 0) continue;
      std::string name = kNames[op];
      if (op == xnu_model::kPidInfo || op == xnu_model::kListPids) name += "." + std::to_string(k);
      s += (first ? "\"" : ",\"") + name + "\":" + std::to_string(g_count.calls[op][k]);
      first = false;
    }
  }
  s += "}}";
  return s;
}

Answer model_record(const Request& r) {
  Answer a;
  Proc* p = lookup(r.pid);
  if (!p) {
    a.error = ESRCH;
    return a;
  }
  char b[1024];
  snprintf(b, sizeof b,
           "{\"pid\":%d,\"ppid\":%d,\"uniqueid\":%llu,\"puniqueid\":%llu,\"idversion\":%d,\"origPpidversion\":%d,"
           "\"restricted\":%s,\"zombie\":%s,\"seq\":%llu,\"comm\":\"%s\",\"exe\":\"%s\"}",
           p->pid, p->ppid, (unsigned long long)p->uniqueid, (unsigned long long)p->puniqueid, p->idversion, p->orig_ppidversion,
           p->restricted ? "true" : "false", p->zombie ? "true" : "false", (unsigned long long)p->seq,
           json_escape(p->comm).c_str(), json_escape(p->exe).c_str());
  a.data = b;
  return a;
}

// (The events queued before a request was sent are drained first: main().)
Answer answer_call(const Request& r);

Answer answer(const Request& r) {
  Answer a = answer_call(r);
  if (g_log) {
    std::string head;
    if (r.op == xnu_model::kListPids && a.error == 0) {
      size_t n = a.data.size() / sizeof(int);
      head = " n=" + std::to_string(n) + " [";
      for (size_t i = 0; i < n && i < 8; i++) {
        int pid;
        memcpy(&pid, a.data.data() + i * sizeof(int), sizeof pid);
        head += (i ? " " : "") + std::to_string(pid);
      }
      head += "]";
    }
    log_line("call %d op %d pid %d a %u size %u -> err %d%s", r.caller, r.op, r.pid, r.a, r.size, a.error, head.c_str());
  }
  return a;
}

Answer answer_call(const Request& r) {
  bool by_flavor = r.op == xnu_model::kPidInfo || r.op == xnu_model::kListPids;
  g_count.calls[r.op & 15][by_flavor ? r.a & 31 : 0]++;
  switch (r.op) {
    case xnu_model::kListPids: return list_pids(r);
    case xnu_model::kPidInfo: return pid_info(r);
    case xnu_model::kPidFdInfo: return pid_fd_info(r);
    case xnu_model::kPidPath: return pid_path(r);
    case xnu_model::kProcPid: return proc_pid(r);
    case xnu_model::kProcArgs2: return proc_args2(r);
    case xnu_model::kProcFind: {
      Answer a;
      Proc* p = lookup(r.pid);
      if (!p || p->zombie) a.error = ESRCH;
      return a;
    }
    case xnu_model::kStats: {
      Answer a;
      a.data = stats_json();
      return a;
    }
    case xnu_model::kModel: return model_record(r);
  }
  Answer a;
  a.error = ENOSYS;
  return a;
}

// ---- the server -------------------------------------------------------------

struct Client {
  std::string in;
};

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      struct pollfd pfd = {fd, POLLOUT, 0};
      poll(&pfd, 1, 1000);
      continue;
    }
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

volatile sig_atomic_t g_stop = 0;
void on_term(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: xnu-kernel <socket> [--release 15.4|13|11] [--platform <dir:dir...>] [--stats <file>]\n");
    return 2;
  }
  std::string path = argv[1], stats_path;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--release") {
      g_release = v == "11" ? Release::k11 : v == "13" ? Release::k13 : Release::k15_4;
    } else if (k == "--platform") {
      g_platform.clear();
      size_t at = 0;
      while (at <= v.size()) {
        size_t end = v.find(':', at);
        if (end == std::string::npos) end = v.size();
        std::string d = v.substr(at, end - at);
        if (!d.empty()) g_platform.push_back(d.back() == '/' ? d : d + "/");
        at = end + 1;
      }
    } else if (k == "--stats") {
      stats_path = v;
    } else if (k == "--log") {
      g_log = fopen(v.c_str(), "w");
      if (g_log) setvbuf(g_log, nullptr, _IOFBF, 1 << 20);
    } else if (k == "--mutate") {
      g_mutations.insert(v);
    } else if (k == "--third-party") {
      char real[4096];
      g_third_party.insert(realpath(v.c_str(), real) ? std::string(real) : v);
    }
  }
  // XNU answers a process's call in that process's own context, at once: the
  // model's kernel is a process the caller waits on, so it runs at the
  // highest priority an ordinary process can have (nice -20, as root), or a
  // loaded machine's scheduler would stand between every call and its answer
  // more than it does (a call here is a round trip to this process, about
  // 60 us on an idle 2-core VM; XNU's are a few). Not a real-time class: a
  // bug here must not starve the machine.
  bool realtime = setpriority(PRIO_PROCESS, 0, -20) == 0;
  g_netlink = open_connector();
  if (g_netlink < 0) {
    fprintf(stderr, "xnu-kernel: the proc connector: %s (it needs root, in the initial pid namespace)\n", strerror(-g_netlink));
    return 1;
  }
  bootstrap();
  drain();
  unlink(path.c_str());
  int srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    fprintf(stderr, "xnu-kernel: socket path too long\n");
    return 1;
  }
  strcpy(addr.sun_path, path.c_str());
  if (bind(srv, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0 || chmod(path.c_str(), 0666) != 0 ||
      listen(srv, 128) != 0) {
    fprintf(stderr, "xnu-kernel: %s: %s\n", path.c_str(), strerror(errno));
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev;
  ev.events = EPOLLIN;
  ev.data.fd = srv;
  epoll_ctl(ep, EPOLL_CTL_ADD, srv, &ev);
  ev.data.fd = g_netlink;
  epoll_ctl(ep, EPOLL_CTL_ADD, g_netlink, &ev);
  std::map<int, Client> clients;
  printf("xnu-kernel: listening on %s, release %s, %zu processes, %s\n", path.c_str(),
         g_release == Release::k11 ? "11" : g_release == Release::k13 ? "13" : "15.4", g_procs.size(),
         realtime ? "nice -20" : "nice 0 (setpriority refused)");
  fflush(stdout);
  std::vector<struct epoll_event> events(64);
  while (!g_stop) {
    int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 1000);
    if (n < 0 && errno == EINTR) continue;
    // Whatever happened before a request of this batch was sent is queued
    // already (a fork's event before fork() returns, an exec's before the new
    // image runs, an exit's before a parent can reap): so the netlink socket
    // is readable in this same batch, and drained before any answer.
    for (int i = 0; i < n; i++) {
      if (events[i].data.fd == g_netlink) drain();
    }
    for (int i = 0; i < n; i++) {
      int fd = events[i].data.fd;
      if (fd == g_netlink) {
        continue;
      } else if (fd == srv) {
        for (;;) {
          int c = accept4(srv, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (c < 0) break;
          ev.events = EPOLLIN;
          ev.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
          clients[c] = Client();
        }
      } else {
        Client& cl = clients[fd];
        char buf[65536];
        bool closed = false;
        // One read a wake-up (epoll is level-triggered: what is left wakes it again).
        ssize_t r;
        do {
          r = read(fd, buf, sizeof buf);
        } while (r < 0 && errno == EINTR);
        if (r > 0) cl.in.append(buf, static_cast<size_t>(r));
        else if (r == 0 || errno != EAGAIN) closed = true;
        while (cl.in.size() >= 4) {
          uint32_t len;
          memcpy(&len, cl.in.data(), 4);
          if (cl.in.size() < 4 + len) break;
          Request req;
          memset(&req, 0, sizeof req);
          memcpy(&req, cl.in.data() + 4, std::min<size_t>(len, sizeof req));
          cl.in.erase(0, 4 + len);
          Answer a = answer(req);
          Reply rep{a.error, a.value};
          std::string out(8, '\0');
          uint32_t total = static_cast<uint32_t>(sizeof rep + a.data.size());
          memcpy(&out[0], &total, 4);
          out.resize(4);
          out.append(reinterpret_cast<const char*>(&rep), sizeof rep);
          out += a.data;
          if (!write_all(fd, out.data(), out.size())) {
            closed = true;
            break;
          }
        }
        if (closed) {
          epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
          close(fd);
          clients.erase(fd);
        }
      }
    }
  }
  drain();
  if (g_log) fclose(g_log);
  if (!stats_path.empty()) {
    if (FILE* f = fopen(stats_path.c_str(), "w")) {
      fprintf(f, "%s\n", stats_json().c_str());
      fclose(f);
    }
  }
  unlink(path.c_str());
  fprintf(stderr, "xnu-kernel: %s\n", stats_json().c_str());
  return g_count.lost > 0 ? 3 : 0;
}
