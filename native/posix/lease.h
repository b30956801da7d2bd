// The POSIX anchor's lease (native/protocol.h, "--lease"): the adoption
// endpoint (a Unix socket in the per-user runtime directory the host made
// 0700), the connections waiting to say INFO or ADOPT, the hand-over of the
// command's output pipes (SCM_RIGHTS), and the drain of those pipes into
// the log while no host is attached. The anchor (anchor.cc) decides what
// the lease means for the tree; this file only carries the means.
#pragma once

#include <poll.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../protocol.h"

namespace cordon {
namespace anchor {

// The descriptors a leased anchor is started with (spawn.cc puts them there).
constexpr int kLeaseStdoutFd = 4;  // the read end of the command's stdout pipe (or /dev/null)
constexpr int kLeaseStderrFd = 5;  // the read end of its stderr pipe (or /dev/null)
constexpr int kLeaseLogFd = 6;     // the log file, O_APPEND (or /dev/null)

class Endpoint {
 public:
  Endpoint() = default;
  ~Endpoint() { remove(); }
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Listens on <dir>/<pid>-<id>.sock: 0 or a negative errno (EADDRINUSE:
  // something is there already; it is never replaced).
  int open(const std::string& dir, const std::string& id);
  const std::string& path() const { return path_; }
  bool listening() const { return listen_fd_ >= 0; }
  // Stops listening and removes the socket and the host's <id>.json beside it
  // (idempotent); pending connections are closed.
  void remove();

  // The poll entries it needs (the listening socket, each pending connection).
  void add_pollfds(std::vector<pollfd>& fds) const;
  // After poll: accepts, reads; returns the complete first lines, each with
  // the connection it came on (which the caller now owns: answer and close,
  // or keep as the control channel).
  struct Request {
    int fd;
    std::string line;
  };
  std::vector<Request> handle(const std::vector<pollfd>& fds);

 private:
  struct Pending {
    int fd;
    protocol::LineReader reader{false};
    int64_t since;
  };
  std::string path_;
  int listen_fd_ = -1;
  std::vector<Pending> pending_;
};

// Writes `line` on `fd` (blocking), with `pass` attached as SCM_RIGHTS when
// not empty. Returns false when the peer is gone.
bool send_line(int fd, const std::string& line, const std::vector<int>& pass);

// The command's stdout and stderr, read by the anchor into the log while no
// host is attached (so the tree's writers never block on a full pipe).
class Drain {
 public:
  // Takes fds 4-6 as the host passed them (a pipe or socket for the output,
  // a regular file for the log; anything else is not used).
  void adopt_startup_fds();
  // The output read ends still open (passed to an adopter), in order, each
  // with whether it is there.
  std::vector<int> open_outputs() const;
  bool has_stdout() const { return out_[0] >= 0; }
  bool has_stderr() const { return out_[1] >= 0; }
  void add_pollfds(std::vector<pollfd>& fds) const;
  void handle(const std::vector<pollfd>& fds);

 private:
  int out_[2] = {-1, -1};
  int log_ = -1;
};

}  // namespace anchor
}  // namespace cordon
