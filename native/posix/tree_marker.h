// The process-group tier's marker (native/posix/tier_process_group.cc): every
// member carries the tree's token in its environment, as one element of
// CORDON_TREE (a ':'-separated list: a tree started inside another tree keeps
// the outer tree's token too), so the anchor's sweep finds the members that
// left the tree's process group.
#pragma once

#include <cstdint>
#include <string>

namespace cordon {
namespace anchor {

// The environment variable that carries the tokens.
constexpr const char* kMarkerName = "CORDON_TREE";

class TreeMarker {
 public:
  // Makes the token: <anchor pid>.<anchor start>.<128 random bits>. The pid
  // and start name the tree in a report; the bits are what a process outside
  // it cannot guess. Sets `start` to the anchor's start time. False (errno
  // set) without a random source.
  bool make(uint64_t& start);

  // Whether an environment block ("NAME=value" strings, each NUL-ended)
  // carries this token as one element of a CORDON_TREE (any of them, should
  // there be several).
  bool carried_by(const std::string& env) const;

  // CORDON_TREE=<outer tokens:>token, what the command gets (`outer`: the
  // anchor's own CORDON_TREE, if it runs inside another tree).
  std::string entry(const char* outer) const;

  const std::string& token() const { return token_; }

 private:
  std::string token_;
};

}  // namespace anchor
}  // namespace cordon
