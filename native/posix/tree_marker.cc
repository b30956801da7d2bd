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

bool TreeMarker::carried_by_process(int64_t pid, uint64_t start_time, std::string& env) const {
  for (int round = 0;; ++round) {
    if (cordon::read_environment(pid, start_time, env) != 0) return false;
    if (!env.empty()) return carried_by(env);
    if (round == 3 || cordon::exiting_or_gone(pid, start_time)) return false;
    usleep(10000);
  }
}

bool MarkerReadings::marked(const Member& p, Walk& walk) {
  walk.went = false;
  Key key{p.pid, p.start_time};
  if (unmarked_.count(key)) {
    walk.unmarked.insert(key);
    return false;
  }
  auto known = withheld_.find(key);
  if (known != withheld_.end() && known->second == p.name) {
    walk.withheld[key] = p.name;
    return false;
  }
  int rc = cordon::read_environment(p.pid, p.start_time, walk.env);
  if (rc == -EACCES) {
    walk.withheld[key] = p.name;
    walk.withheld_new++;
    return false;
  }
  // Unreadable, or read empty: gone, or in exit (its memory, so its
  // environment, dropped while it still reads as alive: on XNU from the
  // task's termination, kern.procargs2 answers EINVAL until it is a zombie).
  // A process in exit may have forked after the walk's listing: it went.
  if (rc != 0) {
    walk.went = cordon::exiting_or_gone(p.pid, p.start_time);
    return false;
  }
  if (marker_.carried_by(walk.env)) return true;
  if (!walk.env.empty()) walk.unmarked.insert(key);
  else if (cordon::exiting_or_gone(p.pid, p.start_time)) walk.went = true;
  else mid_exec.push_back(p);
  return false;
}

bool MarkerReadings::judged(int64_t pid, const Walk& walk) const {
  auto in_set = [pid](const std::set<Key>& keys) {
    auto at = keys.lower_bound({pid, 0});
    return at != keys.end() && at->first == pid;
  };
  auto in_map = [pid](const std::map<Key, std::string>& keys) {
    auto at = keys.lower_bound({pid, 0});
    return at != keys.end() && at->first.first == pid;
  };
  return in_set(walk.unmarked) || in_map(walk.withheld) || in_set(unmarked_) || in_map(withheld_);
}

void MarkerReadings::forget_gone(Walk& walk) {
  unmarked_.swap(walk.unmarked);
  withheld_.swap(walk.withheld);
}

void MarkerReadings::keep(const Walk& walk) {
  unmarked_.insert(walk.unmarked.begin(), walk.unmarked.end());
  for (auto& w : walk.withheld) withheld_[w.first] = w.second;
}

void Lineage::seed(const LineageIds& ids) {
  if (ids.unique_id != 0) seeds_.insert(ids.unique_id);
  if (ids.id_version != 0) seed_versions_.insert(ids.id_version);
}

void Lineage::add(const LineageIds& ids) {
  bool fresh = false;
  if (ids.unique_id != 0 && seeds_.count(ids.unique_id) == 0) fresh = ids_.insert(ids.unique_id).second || fresh;
  if (ids.id_version != 0 && seed_versions_.count(ids.id_version) == 0) fresh = versions_.insert(ids.id_version).second || fresh;
  if (!fresh) return;
  order_.push_back(ids);
  if (order_.size() > kMaxIds) {
    ids_.erase(order_.front().unique_id);
    versions_.erase(order_.front().id_version);
    order_.pop_front();
  }
}

void Lineage::settle(std::vector<Member>& unclaimed, const std::function<void(const Member&)>& claim) {
  for (bool more = true; more;) {
    more = false;
    for (auto& p : unclaimed) {
      if (p.pid == 0 || !parent_known(p)) continue;
      if (cordon::same_process_alive(p.pid, p.start_time)) {
        claim(p);
        more = true;
      }
      p.pid = 0;  // (decided)
    }
  }
}

}  // namespace anchor
}  // namespace cordon
