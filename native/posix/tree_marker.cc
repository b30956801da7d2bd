// The process-group tier's marker: see tree_marker.h.
#include "tree_marker.h"

#include <errno.h>
#include <unistd.h>

#include <cstdio>

#include "../cordon.h"

namespace cordon {
namespace anchor {

bool TreeMarker::make(uint64_t& start) {
  unsigned char secret[16];
  int rc = cordon::random_bytes(secret, sizeof secret);
  if (rc != 0) {
    errno = -rc;
    return false;
  }
  start = cordon::start_time_of(getpid());
  char head[64];
  snprintf(head, sizeof head, "%lld.%llu.", static_cast<long long>(getpid()), static_cast<unsigned long long>(start));
  token_ = head;
  static const char kHex[] = "0123456789abcdef";
  for (unsigned char b : secret) {
    token_ += kHex[b >> 4];
    token_ += kHex[b & 15];
  }
  return true;
}

bool TreeMarker::carried_by(const std::string& env) const {
  const std::string key = std::string(kMarkerName) + "=";
  for (size_t at = 0; at < env.size();) {
    size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    if (env.compare(at, key.size(), key) == 0) {
      for (size_t el = at + key.size(); el <= end;) {
        size_t stop = env.find(':', el);
        if (stop == std::string::npos || stop > end) stop = end;
        if (stop - el == token_.size() && env.compare(el, token_.size(), token_) == 0) return true;
        el = stop + 1;
      }
    }
    at = end + 1;
  }
  return false;
}

std::string TreeMarker::entry(const char* outer) const {
  return std::string(kMarkerName) + "=" + (outer && *outer ? std::string(outer) + ":" : "") + token_;
}

}  // namespace anchor
}  // namespace cordon
