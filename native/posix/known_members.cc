#include "known_members.h"

#include <string>

#include "../protocol.h"

namespace cordon {
namespace anchor {

void KnownMembers::remember(const Member& m) {
  members_[m.pid] = m;
  lineage_.add(m);
  // Seen outside the tree's group (setsid, setpgid): the group signal misses
  // it, only the snapshot or the marker knows it. The host reports it.
  if (m.pgid != group_ && reported_outside_.insert({m.pid, m.start_time}).second) {
    std::string cmd = m.command.empty() ? cordon::command_line(m.pid) : m.command;
    host_.send(protocol::left_group(m.pid, cmd));
  }
}

std::vector<Member> KnownMembers::alive() {
  std::vector<Member> out;
  for (auto it = members_.begin(); it != members_.end();) {
    if (!cordon::same_process_alive(it->second.pid, it->second.start_time)) {
      it = members_.erase(it);
      continue;
    }
    note_if_left(it->second);
    out.push_back(it->second);
    out.back().from_snapshot = true;
    ++it;
  }
  return out;
}

void KnownMembers::note_if_left(Member& m) {
  if (m.pgid != group_ || reported_outside_.count({m.pid, m.start_time})) return;
  int64_t pgid = cordon::current_pgid(m.pid, m.start_time);
  if (pgid < 0 || pgid == group_) return;
  m.pgid = pgid;
  Member copy = m;
  remember(copy);
}

}  // namespace anchor
}  // namespace cordon
