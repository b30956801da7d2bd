// A Unix stream socket for a path, as the lease's endpoint (the anchor,
// lease.cc) and its clients (the addon, control.cc) both need it.
#pragma once

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <string>

namespace cordon {

// Fills `addr` for `path` and makes the socket: its descriptor, or a negative
// errno (-ENAMETOOLONG: the path does not fit a socket address).
inline int unix_socket_for(const std::string& path, sockaddr_un& addr) {
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return -ENAMETOOLONG;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  return fd < 0 ? -errno : fd;
}

// The kernel's buffer for each direction of a control or adoption socket,
// asked for at creation: macOS gives a Unix socket pair 8 KiB (Linux about
// 200 KiB), and the anchor's writes (LEFT lines of a large tree, an
// adopter's replay) must not stall it (no reaping, no escalation, no lease
// clock) while a busy host reads late. Best effort: the kernel may cap it
// (Linux: net.core.wmem_max), never refuse the socket for it.
inline void widen_socket_buffers(int fd) {
  int size = 256 * 1024;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

}  // namespace cordon
