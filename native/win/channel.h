// The anchor's control channel (channel.cc): where its ends come from, who
// holds it, and how lines are written to it. The control loop (control.cc)
// reads it and decides what each line means.
//
// Node spawns the anchor with the command's stdio on its standard handles
// and the control channel as two overlapped named pipes that libuv hands
// over in STARTUPINFO.lpReserved2: CRT fd 3 carries the anchor's lines to the
// host, fd 4 the host's commands (two pipes, so a failed host write can never
// discard lines the host has not read yet). Only the anchor holds them: the
// command never inherits them. A host that adopts a leased tree talks over
// its one endpoint connection instead, both ways.
#pragma once

#include "anchor.h"

#include <cstdint>
#include <string>

namespace cordon {
namespace anchor {

// A CRT fd as libuv passes it (STARTUPINFO.lpReserved2: an int count, count
// flag bytes, count HANDLEs), read directly so it works with any C runtime;
// INVALID_HANDLE_VALUE when there is none.
HANDLE crt_handle(int fd);

// Who holds the control channel.
struct Host {
  enum class State {
    kFirst,     // the host that started the anchor: fds 3 (out) and 4 (in)
    kAdopter,   // a host that adopted the tree: its endpoint connection, both ways
    kDetached,  // leased, and no host: the lease clock runs
    kGone,      // the host is gone, and no lease holds the tree: the teardown
  };
  State state = State::kFirst;
  HANDLE in = INVALID_HANDLE_VALUE;   // host -> anchor (fd 4; an adopter's connection)
  HANDLE out = INVALID_HANDLE_VALUE;  // anchor -> host (fd 3; the same connection)
  bool write_failed = false;          // a write to it failed: nothing more is written to it

  // The channel is there to read (a host holds it).
  bool open() const { return state == State::kFirst || state == State::kAdopter; }
  // Lines go out on it.
  bool writable() const { return open() && !write_failed; }
};

// The anchor's overlapped writes of whole lines (to the host, an adopter, an
// endpoint client), each to a pipe associated with the anchor's port: each
// write is one operation, freed when its completion is dequeued (done()).
class Writer {
 public:
  // One overlapped write of `line` to `pipe`; `close_after`: closed when done.
  // false: it failed at once (traced).
  bool write(HANDLE pipe, const std::string& line, HANDLE close_after);
  // A write's completion (`ov`, as dequeued): frees it. True when it failed
  // on the channel of the host attached now.
  bool done(BOOL ok, OVERLAPPED* ov);
  // The host changed (its EOF, an adoption): an earlier write's failure is
  // not the new host's.
  void next_host() { gen_++; }
  // Writes whose completion has not been dequeued yet.
  int pending() const { return pending_; }

 private:
  uint64_t gen_ = 0;  // bumped at each host change
  int pending_ = 0;
};

}  // namespace anchor
}  // namespace cordon
