// A leased tree's captured output (protocol.h "Output of a leased tree";
// relay.cc): so that the output outlives the host's pipes, the command
// writes into a pipe of the anchor's, and a thread per stream copies what
// comes to the host's pipe while that host lives, then into the log (--log)
// and to the adopter's OUTPUT connection. Blocking I/O on its own thread: a
// reader that does not read holds up that stream only, as a pipe would.
#pragma once

#include "anchor.h"

#include <string>
#include <vector>

namespace cordon {
namespace anchor {

// One relayed stream.
class Relay {
 public:
  explicit Relay(int fd) : fd_(fd) {}
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  int fd() const { return fd_; }
  // Takes the relay's lock, waiting at most about `ms` (its thread holds it
  // while it copies a chunk, which a reader that does not read can hold up).
  bool lock(int64_t ms);
  // With the lock held: `pipe` (an adopter's OUTPUT connection, overlapped)
  // reads the stream from now on, once `ack` is written to it (else it is
  // closed); the reader before it is closed. Unlocks.
  void hand_over(HANDLE pipe, const std::string& ack);

 private:
  friend class Relays;
  void copy(const char* buf, DWORD n);
  static DWORD WINAPI run(LPVOID self);

  int fd_;
  HANDLE read_ = nullptr;  // the anchor's pipe, read end
  HANDLE host_ = nullptr;  // the first host's pipe, until a write to it fails
  HANDLE sink_ = nullptr;  // an adopter's OUTPUT connection (overlapped)
  HANDLE log_ = nullptr;   // shared by both streams (not owned)
  CRITICAL_SECTION* log_mu_ = nullptr;
  HANDLE thread_ = nullptr;
  CRITICAL_SECTION mu_;
};

// The relays of one tree (none for a tree that is not leased).
class Relays {
 public:
  Relays() = default;
  Relays(const Relays&) = delete;
  Relays& operator=(const Relays&) = delete;

  // Before the command exists: opens the log (o.log; without it, or when it
  // cannot be opened, output with no host attached is lost) and starts a
  // relay for each captured stream in o.watch_fds whose standard handle is
  // a pipe (one for both when stdout and stderr are one pipe). The command's
  // standard handle becomes the anchor's pipe; the host's is never
  // inheritable. A pipe that cannot be made leaves the host's pipe to the
  // command (traced).
  void start(const Options& o);
  // Whether the log is open (ADOPTED names it).
  bool logging() const { return log_ != nullptr; }
  // The relay of stream `fd` (1, 2), or nullptr.
  Relay* find(int fd) const;
  // Waits for the relays to end (their streams' writers are gone), 2 s at
  // most in all, so that what they still copy reaches its reader.
  void wait();

 private:
  std::vector<Relay*> relays_;
  HANDLE log_ = nullptr;  // --log, appended to by the relays
  CRITICAL_SECTION log_mu_;
};

}  // namespace anchor
}  // namespace cordon
