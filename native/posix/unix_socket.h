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

}  // namespace cordon
