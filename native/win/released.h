// Who still holds the tree's captured output (released.cc): what RELEASED
// rests on.
//
// The anchor keeps one duplicate of each captured stdout/stderr write end
// (--watch-fd) and asks the kernel how many handles the pipe's file object
// has (NtQueryObject ObjectBasicInformation.HandleCount). When only its own
// is left, no member holds the output: it closes its duplicate (the host
// sees EOF) and, once the root has exited, the anchor says RELEASED. Which
// member holds the output is not known (LEFT reports holds 0). Where the
// count cannot be read, RELEASED comes when the job is empty.
#pragma once

#include "anchor.h"

#include <vector>

namespace cordon {
namespace anchor {

class ReleaseWatch {
 public:
  // One duplicate of the write end of each captured output in `fds` (1:
  // stdout, 2: stderr; one for both when they are one pipe), before the
  // command starts.
  void start(const std::vector<int>& fds);
  // Closes each duplicate nobody else holds (and one whose count cannot be
  // read).
  void check();
  // Whether every watched output is let go of (every duplicate closed) and
  // every count could be read: RELEASED may be said once the root exited.
  bool released() const;
  // Whether a duplicate is still open (the loop then looks again within
  // 100 ms).
  bool watching() const;
  // Closes every duplicate (the anchor is ending).
  void close();

 private:
  std::vector<HANDLE> watched_;
  bool countable_ = true;  // every handle count could be read
};

}  // namespace anchor
}  // namespace cordon
