// Small descriptor helpers the anchor's parts share (lease.cc, pty_relay.cc).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

namespace cordon {
namespace anchor {

// A pipe or a socket (what the host makes for a tree's stdio).
inline bool is_stream(int fd) {
  struct stat sb;
  return fstat(fd, &sb) == 0 && (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode));
}

inline void set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

}  // namespace anchor
}  // namespace cordon
