// The lease's means (lease.h): the adoption endpoint, the hand-over of the
// output pipes, the drain into the log.
#include "lease.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "descriptors.h"
#include "tier.h"
#include "unix_socket.h"

namespace cordon {
namespace anchor {

using protocol::trace;

namespace {

// Connections that have not said their line within this are dropped, and
// at most this many wait at once (one slow client cannot pin descriptors).
constexpr int64_t kPendingMs = 5000;
constexpr size_t kMaxPending = 16;

void cloexec_nonblock(int fd) {
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  set_nonblocking(fd);
}

}  // namespace

int Endpoint::open(const std::string& dir, const std::string& id) {
  std::string path = dir + "/" + std::to_string(static_cast<long long>(getpid())) + "-" + id + ".sock";
  sockaddr_un addr;
  int fd = unix_socket_for(path, addr);
  if (fd < 0) return fd;
  cloexec_nonblock(fd);
  // The directory (0700, the host checked it) is the access check; the
  // socket itself is the user's only as well.
  mode_t old = umask(077);
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old);
  if (rc != 0 || listen(fd, 16) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  listen_fd_ = fd;
  path_ = path;
  trace("lease endpoint %s", path.c_str());
  return 0;
}

void Endpoint::remove() {
  for (auto& p : pending_) close(p.fd);
  pending_.clear();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
  if (!path_.empty()) {
    unlink(path_.c_str());
    std::string json = path_.substr(0, path_.size() - 5) + ".json";  // "<id>.sock" -> "<id>.json"
    unlink(json.c_str());
    path_.clear();
  }
}

void Endpoint::add_pollfds(std::vector<pollfd>& fds) const {
  if (listen_fd_ >= 0) fds.push_back(pollfd{listen_fd_, POLLIN, 0});
  for (auto& p : pending_) fds.push_back(pollfd{p.fd, POLLIN, 0});
}

std::vector<Endpoint::Request> Endpoint::handle(const std::vector<pollfd>& fds) {
  std::vector<Request> out;
  int64_t now = now_ms();
  for (auto& f : fds) {
    if (!f.revents) continue;
    if (f.fd == listen_fd_) {
      for (;;) {
        int c = accept(listen_fd_, nullptr, nullptr);
        if (c < 0) break;
        cloexec_nonblock(c);
        widen_socket_buffers(c);
        if (pending_.size() >= kMaxPending) {
          close(pending_.front().fd);
          pending_.erase(pending_.begin());
        }
        pending_.push_back(Pending{c, protocol::LineReader(false), now});
      }
      continue;
    }
    for (size_t i = 0; i < pending_.size(); i++) {
      if (pending_[i].fd != f.fd) continue;
      char buf[512];
      ssize_t n = read(f.fd, buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
      std::vector<std::string> lines;
      if (n > 0) pending_[i].reader.feed(buf, static_cast<size_t>(n), lines);
      if (!lines.empty()) {
        out.push_back(Request{f.fd, lines.front()});
      } else if (n > 0) {
        break;
      } else {
        close(f.fd);
      }
      pending_.erase(pending_.begin() + static_cast<long>(i));
      break;
    }
  }
  for (size_t i = 0; i < pending_.size();) {
    if (now - pending_[i].since > kPendingMs) {
      close(pending_[i].fd);
      pending_.erase(pending_.begin() + static_cast<long>(i));
    } else {
      i++;
    }
  }
  return out;
}

bool send_line(int fd, const std::string& line, const std::vector<int>& pass) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  size_t done = 0;
  if (!pass.empty()) {
    msghdr msg;
    memset(&msg, 0, sizeof msg);
    iovec iov{const_cast<char*>(line.data()), line.size()};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> control(CMSG_SPACE(sizeof(int) * pass.size()), 0);
    msg.msg_control = control.data();
    msg.msg_controllen = static_cast<socklen_t>(control.size());
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * pass.size());
    memcpy(CMSG_DATA(cm), pass.data(), sizeof(int) * pass.size());
    ssize_t w;
    do {
      w = sendmsg(fd, &msg, 0);
    } while (w < 0 && errno == EINTR);
    if (w <= 0) return false;
    done = static_cast<size_t>(w);
  }
  while (done < line.size()) {
    ssize_t w = write(fd, line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

void Drain::adopt_startup_fds() {
  if (is_stream(kLeaseStdoutFd)) out_[0] = kLeaseStdoutFd;
  if (is_stream(kLeaseStderrFd)) out_[1] = kLeaseStderrFd;
  struct stat sb;
  if (fstat(kLeaseLogFd, &sb) == 0 && S_ISREG(sb.st_mode)) log_ = kLeaseLogFd;
  for (int fd : {kLeaseStdoutFd, kLeaseStderrFd, kLeaseLogFd}) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

std::vector<int> Drain::open_outputs() const {
  std::vector<int> out;
  for (int fd : out_) {
    if (fd >= 0) out.push_back(fd);
  }
  return out;
}

void Drain::add_pollfds(std::vector<pollfd>& fds) const {
  for (int fd : out_) {
    if (fd >= 0) fds.push_back(pollfd{fd, POLLIN, 0});
  }
}

void Drain::handle(const std::vector<pollfd>& fds) {
  for (auto& f : fds) {
    if (!f.revents) continue;
    for (int& fd : out_) {
      if (fd != f.fd || fd < 0) continue;
      // Never blocks: the host's copy was non-blocking already (libuv), and
      // the flag is the pipe's, shared with whoever reads it next.
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      char buf[65536];
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        trace("output fd %d: end", fd);
        close(fd);
        fd = -1;
        continue;
      }
      for (ssize_t off = 0; log_ >= 0 && off < n;) {
        ssize_t w = write(log_, buf + off, static_cast<size_t>(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += w;
      }
    }
  }
}

}  // namespace anchor
}  // namespace cordon
