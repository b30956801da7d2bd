// The anchor's terminal: see pty_relay.h.
#include "pty_relay.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "../protocol.h"
#include "descriptors.h"

namespace cordon {
namespace anchor {

using protocol::trace;

namespace {

// Each direction's buffer (a pipe's worth: a host that reads nothing holds
// the tree's output at about what a pipe would).
constexpr size_t kBufferCap = 65536;
// Once the tree is quiescent, how long the host may take nothing of the
// terminal's last output before the anchor drops it (well below the host's
// own wait on a stopping anchor, ANCHOR_WAIT_SLACK_MS).
constexpr int64_t kFinishStallMs = 2000;
#ifdef F_SETPIPE_SZ
// At most what the relay holds once the tree is quiescent, with what the
// terminal still holds, handed to the host's pipe (a pipe grows to 1 MiB,
// /proc/sys/fs/pipe-max-size, without privilege).
constexpr size_t kRestCap = 1 << 20;
#endif

int64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// What one transfer left: more may come later (the descriptor would block, or
// the buffer is full), or the descriptor is done (its end, or an error: errno).
enum class Transfer { kLater, kEnd };

// Reads `fd` into `into` up to kBufferCap (`keep` false: what is read is dropped).
Transfer fill(int fd, std::string& into, bool keep) {
  char buf[16384];
  while (into.size() < kBufferCap) {
    size_t room = kBufferCap - into.size();
    ssize_t n = read(fd, buf, room < sizeof buf ? room : sizeof buf);
    if (n > 0 && keep) into.append(buf, static_cast<size_t>(n));
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    if (n < 0 && errno == EAGAIN) return Transfer::kLater;
    if (n == 0) errno = 0;
    return Transfer::kEnd;
  }
  return Transfer::kLater;
}

// Writes what `from` holds to `fd`; `progress` is set when anything went.
Transfer drain(int fd, std::string& from, bool& progress) {
  while (!from.empty()) {
    ssize_t n = write(fd, from.data(), from.size());
    if (n > 0) {
      from.erase(0, static_cast<size_t>(n));
      progress = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return Transfer::kLater;
    if (n == 0) errno = EIO;
    return Transfer::kEnd;
  }
  return Transfer::kLater;
}

}  // namespace

PtyRelay::~PtyRelay() {
  for (int* fd : {&master_, &slave_, &in_, &out_}) close_fd(*fd);
}

void PtyRelay::close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

int PtyRelay::open(int cols, int rows) {
  master_ = posix_openpt(O_RDWR | O_NOCTTY);
  if (master_ < 0) return -errno;
  fcntl(master_, F_SETFD, FD_CLOEXEC);
  if (grantpt(master_) != 0 || unlockpt(master_) != 0) return -errno;
#ifdef __linux__
  char name[128];
  if (ptsname_r(master_, name, sizeof name) != 0) return -errno;
#else
  const char* name = ptsname(master_);
  if (!name) return -errno;
#endif
  slave_ = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave_ < 0) return -errno;
  // A terminal as a terminal emulator opens it: the kernel's defaults (cooked
  // input, echo, Ctrl-C as SIGINT, output CR-LF), input in UTF-8.
  struct termios t;
  if (tcgetattr(slave_, &t) == 0) {
#ifdef IUTF8
    t.c_iflag |= IUTF8;
#endif
    tcsetattr(slave_, TCSANOW, &t);
  }
  resize(cols, rows);
  set_nonblocking(master_);
  opened_ = true;
  trace("terminal %s, %dx%d", name, cols, rows);
  return 0;
}

int PtyRelay::control_from_anchor(pid_t group) {
  if (ioctl(slave_, TIOCSCTTY, 0) != 0) return -errno;
  if (tcsetpgrp(slave_, group) != 0) return -errno;
  return 0;
}

int PtyRelay::child_enter(bool own_session) {
  if (own_session) {
    if (setsid() < 0) return errno;
    if (ioctl(slave_, TIOCSCTTY, 0) != 0) return errno;
  }
  for (int fd = 0; fd <= 2; fd++) {
    if (dup2(slave_, fd) < 0) return errno;
  }
  return 0;
}

void PtyRelay::start() {
  close_fd(slave_);
  in_ = fcntl(0, F_DUPFD_CLOEXEC, 3);
  out_ = fcntl(1, F_DUPFD_CLOEXEC, 3);
  // The host's pipes are the anchor's alone: non-blocking. A descriptor the
  // host passed on is left as it is, shared.
  if (in_ >= 0 && is_stream(in_)) set_nonblocking(in_);
  if (out_ >= 0 && is_stream(out_)) set_nonblocking(out_);
}

void PtyRelay::replace_input(int fd) {
  close_fd(in_);
  in_ = fd;
  set_nonblocking(in_);
}

void PtyRelay::resize(int cols, int rows) {
  if (master_ < 0) return;
  struct winsize ws;
  memset(&ws, 0, sizeof ws);
  ws.ws_col = static_cast<unsigned short>(cols);
  ws.ws_row = static_cast<unsigned short>(rows);
  if (ioctl(master_, TIOCSWINSZ, &ws) != 0) trace("TIOCSWINSZ: %s", strerror(errno));
}

void PtyRelay::add_pollfds(std::vector<pollfd>& fds) {
  poll_master_ = poll_in_ = poll_out_ = -1;
  const size_t base = fds.size();  // (handle() gets only what is added here)
  short master_events = 0;
  if (master_ >= 0 && to_host_.size() < kBufferCap) master_events |= POLLIN;
  if (master_ >= 0 && !to_terminal_.empty()) master_events |= POLLOUT;
  if (master_events) {
    poll_master_ = static_cast<int>(fds.size() - base);
    fds.push_back(pollfd{master_, master_events, 0});
  }
  if (in_ >= 0 && master_ >= 0 && to_terminal_.size() < kBufferCap) {
    poll_in_ = static_cast<int>(fds.size() - base);
    fds.push_back(pollfd{in_, POLLIN, 0});
  }
  if (out_ >= 0 && !to_host_.empty()) {
    poll_out_ = static_cast<int>(fds.size() - base);
    fds.push_back(pollfd{out_, POLLOUT, 0});
  }
}

void PtyRelay::handle(const std::vector<pollfd>& fds) {
  auto fired = [&](int i, short mask) {
    return i >= 0 && static_cast<size_t>(i) < fds.size() && (fds[static_cast<size_t>(i)].revents & mask);
  };
  if (fired(poll_in_, POLLIN | POLLHUP | POLLERR)) read_input();
  if (fired(poll_master_, POLLOUT | POLLERR) || !to_terminal_.empty()) write_master();
  if (fired(poll_master_, POLLIN | POLLHUP | POLLERR)) read_master();
  if (!to_host_.empty()) write_output();
}

void PtyRelay::close_when_delivered() {
  if (!released() || (out_ >= 0 && !to_host_.empty())) return;
  close_fd(out_);  // the host's EOF
  close_fd(in_);
}

void PtyRelay::finish() {
  // Input for a terminal no process holds is for no one.
  close_fd(in_);
  to_terminal_.clear();
  hand_over_rest();
  int64_t last = monotonic_ms();
  for (;;) {
    close_when_delivered();
    if (out_ < 0) break;
    std::vector<pollfd> fds;
    add_pollfds(fds);
    int64_t left = last + kFinishStallMs - monotonic_ms();
    if (fds.empty() || left <= 0) {
      trace("terminal output: the host took nothing for %lld ms after the tree's end, %zu bytes dropped",
            static_cast<long long>(kFinishStallMs), to_host_.size());
      break;
    }
    size_t had = to_host_.size();
    bool master_open = master_ >= 0;
    if (poll(fds.data(), static_cast<nfds_t>(fds.size()), static_cast<int>(left)) < 0 && errno != EINTR) break;
    auto fired = [&](int i) { return i >= 0 && fds[static_cast<size_t>(i)].revents != 0; };
    bool took = false;
    if (fired(poll_master_)) read_master();
    // What the terminal gives after the tree's end (the kernel may still be
    // moving the last writes to the master when the tree is seen gone) goes
    // to the pipe the same way, grown again to hold it.
    took = hand_over_rest();
    if (took || to_host_.size() != had || master_open != (master_ >= 0)) last = monotonic_ms();
  }
  to_host_.clear();
  for (int* fd : {&master_, &in_, &out_}) close_fd(*fd);
}

// Linux: the tree is over, so what the terminal still holds is bounded by the
// kernel's own buffers (a few pages). What it gives now is read, and the
// host's pipe is grown to take it with what it already holds: the kernel then
// keeps the terminal's last output for the host, as it keeps a pipe's, and
// the anchor waits for no reader (a host whose event loop stalls loses
// nothing). finish() calls this again for whatever the terminal gives later,
// until its end (EIO). Where the pipe cannot grow (no F_SETPIPE_SZ: macOS;
// the user's pipe quota; not a pipe) finish() delivers as before.
bool PtyRelay::hand_over_rest() {
#ifdef F_SETPIPE_SZ
  if (out_ < 0) return false;
  if (master_ >= 0) {
    char buf[16384];
    // Bounded all the same: a process the tier cannot see (the process-group
    // tier) may still hold the slave and write as fast as this reads.
    while (to_host_.size() < kRestCap) {
      ssize_t n = read(master_, buf, sizeof buf);
      if (n > 0) {
        to_host_.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;  // more may come: finish() polls for it
      // EIO (Linux), or 0: no process has the slave open.
      trace("terminal released (%s)", n == 0 ? "EOF" : strerror(errno));
      close_fd(master_);
      break;
    }
  }
  if (to_host_.empty()) return false;
  int held = 0;
  int size = fcntl(out_, F_GETPIPE_SZ);
  if (size < 0 || ioctl(out_, FIONREAD, &held) != 0) return write_output();
  size_t need = static_cast<size_t>(held) + to_host_.size();
  if (need > static_cast<size_t>(size) &&
      (need > static_cast<size_t>(INT_MAX) || fcntl(out_, F_SETPIPE_SZ, static_cast<int>(need)) < 0)) {
    trace("terminal output: the host's pipe not grown to %zu bytes (%s)", need, strerror(errno));
  }
  bool took = write_output();
  // A pipe's room is counted in pages, not bytes: a write that does not fit
  // what is left of the last page starts a new one, so a pipe grown to the
  // bytes it must hold can still refuse some (the host stalled, the output
  // came in many small writes). Doubled until it takes the rest, up to
  // kRestCap beyond the bytes.
  while (out_ >= 0 && !to_host_.empty()) {
    size = fcntl(out_, F_GETPIPE_SZ);
    if (size < 0 || static_cast<size_t>(size) >= need + kRestCap || size > INT_MAX / 2) break;
    if (fcntl(out_, F_SETPIPE_SZ, size * 2) < 0) {
      trace("terminal output: the host's pipe not grown to %d bytes (%s)", size * 2, strerror(errno));
      break;
    }
    took = write_output() || took;
  }
  return took;
#else
  return !to_host_.empty() && write_output();
#endif
}

void PtyRelay::read_master() {
  if (master_ < 0 || fill(master_, to_host_, out_ >= 0) == Transfer::kLater) return;
  // EIO (Linux), or 0: no process has the slave open. Closed, so none opens it again.
  trace("terminal released (%s)", errno == 0 ? "EOF" : strerror(errno));
  close_fd(master_);
  to_terminal_.clear();
}

void PtyRelay::write_master() {
  bool progress = false;
  if (master_ >= 0 && drain(master_, to_terminal_, progress) == Transfer::kEnd) {
    trace("terminal input dropped: %s", strerror(errno));
    to_terminal_.clear();
  }
  if (master_ < 0) to_terminal_.clear();
}

// The host's input. Its EOF ends the relay's input only: a terminal has no
// end of input of its own (Ctrl-D written to it is the line discipline's EOF).
void PtyRelay::read_input() {
  if (in_ >= 0 && fill(in_, to_terminal_, true) == Transfer::kEnd) close_fd(in_);
}

bool PtyRelay::write_output() {
  bool progress = false;
  // EPIPE: the host closed its end (its wait delay, or it is gone): the
  // terminal is still drained, into nothing, so no member blocks on it.
  if (out_ >= 0 && drain(out_, to_host_, progress) == Transfer::kEnd) {
    trace("terminal output to the host ended: %s", strerror(errno));
    close_fd(out_);
  }
  if (out_ < 0) to_host_.clear();
  return progress;
}

}  // namespace anchor
}  // namespace cordon
