// XNU's process calls for cordon's darwin code on Linux: linked into the
// model's anchor and addon (test/xnu-model/build.mjs) in place of libproc,
// sysctl and kqueue. Each call is asked of the model's kernel (kernel.cc),
// which answers as XNU would (docs/xnu-model.md). The anchor also has
// wraps.cc. Test code: nothing of it ships.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "model.h"
#include "xnu.h"

namespace {

using xnu_model::Reply;
using xnu_model::Request;

std::mutex g_mutex;
int g_fd = -1;
pid_t g_owner = 0;          // the process that connected (a forked child connects anew)
dev_t g_dev = 0;            // the connection's identity: the fd may have been closed and reused
ino_t g_ino = 0;

const char* socket_path() {
  const char* env = getenv("CORDON_XNU_MODEL");
  return env && *env ? env : CORDON_XNU_MODEL_SOCKET;
}

bool connected() {
  if (g_fd < 0 || g_owner != getpid()) return false;
  struct stat sb;
  if (syscall(SYS_fstat, g_fd, &sb) != 0) return false;
  return sb.st_dev == g_dev && sb.st_ino == g_ino;
}

bool connect_kernel() {
  if (connected()) return true;
  // (A connection inherited from the parent, or one whose number was closed
  // and reused, is left alone: it is not this process's to use.)
  g_fd = -1;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, socket_path(), sizeof addr.sun_path - 1);
  if (connect(s, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) {
    close(s);
    return false;
  }
  // Out of the way of the descriptors the anchor numbers itself (0-6).
  int high = fcntl(s, F_DUPFD_CLOEXEC, 512);
  if (high >= 0) {
    close(s);
    s = high;
  }
  struct stat sb;
  if (syscall(SYS_fstat, s, &sb) != 0) {
    close(s);
    return false;
  }
  g_fd = s;
  g_owner = getpid();
  g_dev = sb.st_dev;
  g_ino = sb.st_ino;
  return true;
}

bool io_all(bool writing, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = writing ? send(g_fd, p, n, MSG_NOSIGNAL) : recv(g_fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// One call to the kernel: 0 and the answer's bytes (at most `cap` of them
// into `out`), or an errno value. `value`: what the call returns besides.
int ask(Request req, void* out, size_t cap, size_t* got, int* value = nullptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  int saved = errno;
  req.caller = static_cast<int32_t>(getpid());
  req.euid = geteuid();
  req.ruid = getuid();
  for (int attempt = 0; attempt < 2; attempt++) {
    if (!connect_kernel()) {
      errno = saved;
      return ENOSYS;  // no model kernel: nothing is known
    }
    // One write out, as few reads back as the answer's size allows: each
    // is a wake-up of the other side.
    uint32_t len = sizeof req;
    char msg[4 + sizeof req];
    memcpy(msg, &len, 4);
    memcpy(msg + 4, &req, sizeof req);
    thread_local std::string in;
    in.resize(4 + sizeof(Reply) + 4096);
    size_t have = 0;
    auto fill = [&](size_t want) {
      if (in.size() < want) in.resize(want);
      while (have < want) {
        ssize_t r = recv(g_fd, &in[have], in.size() - have, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        have += static_cast<size_t>(r);
      }
      return true;
    };
    uint32_t total = 0;
    Reply rep;
    if (!io_all(true, msg, sizeof msg) || !fill(4 + sizeof rep) || (memcpy(&total, in.data(), 4), total < sizeof rep) ||
        !fill(4 + total)) {
      close(g_fd);
      g_fd = -1;
      continue;
    }
    memcpy(&rep, in.data() + 4, sizeof rep);
    size_t n = total - sizeof rep;
    std::string data = in.substr(4 + sizeof rep, n);
    if (value) *value = rep.value;
    if (rep.error != 0) {
      errno = saved;
      return rep.error;
    }
    size_t copy = n < cap ? n : cap;
    if (copy > 0 && out) memcpy(out, data.data(), copy);
    if (got) *got = copy;
    errno = saved;
    return 0;
  }
  errno = saved;
  return EIO;
}

Request request(uint32_t op, int pid) {
  Request r;
  memset(&r, 0, sizeof r);
  r.op = op;
  r.pid = pid;
  return r;
}

// libproc's convention: the bytes returned, or 0 with errno set.
int bytes_or_errno(int err, size_t got) {
  if (err != 0) {
    errno = err;
    return 0;
  }
  return static_cast<int>(got);
}

}  // namespace

extern "C" {

int proc_listpids(uint32_t type, uint32_t typeinfo, void* buffer, int buffersize) {
  Request r = request(xnu_model::kListPids, 0);
  r.a = type;
  r.b = typeinfo;
  r.size = buffer && buffersize > 0 ? static_cast<uint32_t>(buffersize) : 0;
  size_t got = 0;
  int value = 0;
  int err = ask(r, buffer, r.size, &got, &value);
  if (err == 0 && r.size == 0) return value;
  return bytes_or_errno(err, got);
}

int proc_pidinfo(int pid, int flavor, uint64_t arg, void* buffer, int buffersize) {
  Request r = request(xnu_model::kPidInfo, pid);
  r.a = static_cast<uint32_t>(flavor);
  r.c = arg;
  r.size = buffer && buffersize > 0 ? static_cast<uint32_t>(buffersize) : 0;
  size_t got = 0;
  int value = 0;
  int err = ask(r, buffer, r.size, &got, &value);
  if (err == 0 && r.size == 0) return value;
  if (err == 0 && flavor == PROC_PIDLISTFDS && pid == getpid() && buffer) {
    // The model's own connection is no descriptor of the process's.
    struct proc_fdinfo* fds = static_cast<struct proc_fdinfo*>(buffer);
    size_t n = got / sizeof(struct proc_fdinfo), k = 0;
    for (size_t i = 0; i < n; i++) {
      if (fds[i].proc_fd != g_fd) fds[k++] = fds[i];
    }
    got = k * sizeof(struct proc_fdinfo);
  }
  return bytes_or_errno(err, got);
}

int proc_pidfdinfo(int pid, int fd, int flavor, void* buffer, int buffersize) {
  Request r = request(xnu_model::kPidFdInfo, pid);
  r.a = static_cast<uint32_t>(fd);
  r.b = static_cast<uint32_t>(flavor);
  r.size = buffer && buffersize > 0 ? static_cast<uint32_t>(buffersize) : 0;
  size_t got = 0;
  int err = ask(r, buffer, r.size, &got);
  return bytes_or_errno(err, got);
}

int proc_pidpath(int pid, void* buffer, uint32_t buffersize) {
  Request r = request(xnu_model::kPidPath, pid);
  r.size = buffersize;
  size_t got = 0;
  int err = ask(r, buffer, buffersize, &got);
  if (err != 0) {
    errno = err;
    return 0;
  }
  return static_cast<int>(got > 0 ? got - 1 : 0);
}

int cordon_xnu_sysctl(int* name, unsigned namelen, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  (void)newp;
  if (newlen != 0 || !oldlenp) {
    errno = EPERM;
    return -1;
  }
  if (namelen == 2 && name[0] == CTL_KERN && name[1] == KERN_ARGMAX) {
    if (*oldlenp < sizeof(int)) {
      errno = ENOMEM;
      return -1;
    }
    int v = 1024 * 1024;  // XNU's ARG_MAX (bsd/sys/syslimits.h)
    memcpy(oldp, &v, sizeof v);
    *oldlenp = sizeof v;
    return 0;
  }
  Request r;
  if (namelen == 4 && name[0] == CTL_KERN && name[1] == KERN_PROC && name[2] == KERN_PROC_PID) {
    r = request(xnu_model::kProcPid, name[3]);
  } else if (namelen == 3 && name[0] == CTL_KERN && name[1] == KERN_PROCARGS2) {
    r = request(xnu_model::kProcArgs2, name[2]);
  } else {
    errno = ENOENT;
    return -1;
  }
  r.size = static_cast<uint32_t>(*oldlenp);
  size_t got = 0;
  int err = ask(r, oldp, *oldlenp, &got);
  if (err != 0) {
    errno = err;
    return -1;
  }
  *oldlenp = got;
  return 0;
}

// A kqueue that watches one process's exit (EVFILT_PROC NOTE_EXIT, what the
// darwin code asks of it): a descriptor that poll() sees readable once that
// process has exited. kqueue() makes a placeholder; kevent() puts a pidfd on
// its number, so close() of the kqueue closes it.
int kqueue(void) { return static_cast<int>(syscall(SYS_eventfd2, 0, O_CLOEXEC)); }

int kevent(int kq, const struct kevent* changes, int nchanges, struct kevent* events, int nevents, const struct timespec* timeout) {
  (void)events;
  (void)nevents;
  (void)timeout;
  for (int i = 0; i < nchanges; i++) {
    const struct kevent& c = changes[i];
    if (c.filter != EVFILT_PROC || !(c.flags & EV_ADD) || (c.fflags & ~NOTE_EXIT) != 0) {
      errno = EINVAL;  // (the model watches exits only)
      return -1;
    }
    // filt_procattach: proc_find() of the pid; a zombie is not found.
    Request r = request(xnu_model::kProcFind, static_cast<int>(c.ident));
    int err = ask(r, nullptr, 0, nullptr);
    if (err != 0) {
      errno = err;
      return -1;
    }
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(c.ident), 0));
    if (pidfd < 0) return -1;
    int rc = dup3(pidfd, kq, O_CLOEXEC);
    int err2 = errno;
    close(pidfd);
    if (rc < 0) {
      errno = err2;
      return -1;
    }
  }
  return 0;
}

// sandbox_init(3) for the darwin confine code (native/darwin/confine.cc).
// Seatbelt is not open source, so the model does not pretend to be it: it
// enforces nothing, and records what it was given, for the tests to check
// from outside that the darwin code applies the profile in the command's own
// process before exec (docs/xnu-model.md). With CORDON_XNU_SANDBOX_LOG=<stem>
// each call writes <stem>.<pid>: the caller's pid, its executable at the
// time of the call (/proc/self/exe: the anchor's before the exec, the
// command's after), the flags, then the profile text. With
// CORDON_XNU_SANDBOX_REFUSE=<errno> the call then fails with that errno and an
// error string, as sandbox_init does for a profile macOS does not accept.
int sandbox_init(const char* profile, uint64_t flags, char** errorbuf) {
  if (errorbuf) *errorbuf = nullptr;
  const char* stem = getenv("CORDON_XNU_SANDBOX_LOG");
  if (stem && *stem) {
    std::string path = std::string(stem) + "." + std::to_string(getpid());
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    std::string record = "pid " + std::to_string(getpid()) + "\nexe " + exe + "\nflags " + std::to_string(flags) + "\n--\n" + profile;
    size_t off = 0;
    while (off < record.size()) {
      ssize_t w = write(fd, record.data() + off, record.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
      }
      off += static_cast<size_t>(w);
    }
    close(fd);
  }
  const char* refuse = getenv("CORDON_XNU_SANDBOX_REFUSE");
  if (refuse && *refuse) {
    if (errorbuf) *errorbuf = strdup("the model of XNU refused the profile (CORDON_XNU_SANDBOX_REFUSE)");
    errno = atoi(refuse);
    return -1;
  }
  return 0;
}

void sandbox_free_error(char* errorbuf) { free(errorbuf); }

}  // extern "C"
