// The anchor's terminal (--pty COLS ROWS): the command's stdio is the slave
// side of a new pseudo-terminal, and the anchor keeps the master, relaying
// what the host writes to its fd 0 into the terminal and what the terminal
// prints to its fd 1. The host's pipes are the anchor's alone then (no member
// holds them): the terminal is what the tree holds.
//
// Who holds the terminal is the kernel's to say, exactly: a read of the master
// fails with EIO (or returns 0, macOS) once no process has the slave open, and
// from then on output is over (RELEASED). The anchor then closes the master,
// so a member cannot reopen the slave later, delivers what it read to the host
// and closes the host's pipe (its EOF).
//
// Session: the command must be in the session the terminal controls. In the
// subreaper and cgroup tiers it leads a new session of its own (setsid, then
// TIOCSCTTY); in the process-group tier the anchor leads the session (it left
// the host's in contain()), takes the terminal itself and makes the tree's
// group the terminal's foreground group, so the command stays in the tree's
// pinned group and the tier's identity holds unchanged.
//
// The relay never blocks the anchor: every descriptor is non-blocking (the
// host's pipes were made for this tree alone), and each direction has a
// bounded buffer: when one is full the anchor stops reading its source, so a
// host that does not read holds the tree's output as a pipe would (it does
// not hold the tree's end: see finish()).
//
// macOS: the master is polled like any descriptor; XNU gives the pty master
// kqueue filters (ptmx_kqfilter in bsd/kern/tty_ptmx.c), on which its poll()
// is built (read from XNU's source: nothing here ran on a Mac).
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cordon {
namespace anchor {

class PtyRelay {
 public:
  ~PtyRelay();

  // Whether --pty asked for a terminal (open() made it).
  bool active() const { return opened_; }

  // Opens the terminal, cols x rows: 0 or a negative errno.
  int open(int cols, int rows);
  // The anchor leads the tree's session (the process-group tier): the
  // terminal becomes its controlling terminal, `group` its foreground group.
  // 0 or a negative errno.
  int control_from_anchor(pid_t group);
  // In the command's child: the slave on fds 0-2 and, with `own_session`, a
  // new session whose controlling terminal it is. 0 or an errno.
  int child_enter(bool own_session);
  // In the anchor once the command exists: lets go of the slave and takes fds
  // 0 and 1 (the host's input and output) as the relay's ends.
  void start();

  // A new host's input (an adopter's pipe): the old one is closed.
  void replace_input(int fd);

  // A window size, from RESIZE (the kernel tells the foreground group: SIGWINCH).
  void resize(int cols, int rows);

  // The poll loop's part: add the descriptors the relay waits on, then handle
  // what `fds` (those it added, in order) say.
  void add_pollfds(std::vector<pollfd>& fds);
  void handle(const std::vector<pollfd>& fds);

  // No process holds the terminal any more (its output is over).
  bool released() const { return master_ < 0 && opened_; }
  // Once released and what it read delivered: closes the host's pipe (its
  // EOF) at once, whatever the tree still does.
  void close_when_delivered();
  // The tree is quiescent (nothing holds the terminal): what the terminal
  // and the relay still hold goes to the host. On Linux the host's pipe is
  // grown to hold all of it, so it is written at once and the kernel keeps it
  // for the host. Elsewhere it goes for as long as the host takes any (what
  // it has not taken kFinishStallMs after its last progress is dropped,
  // traced, so a host that does not read cannot hold the tree's end). Then
  // everything is closed.
  void finish();

 private:
  // Linux: the terminal's rest read whole and the host's pipe grown to hold it (finish()).
  // (Writes what it can to the host; true when the host's pipe took some.)
  bool hand_over_rest();
  void read_master();
  void write_master();
  void read_input();
  // True when the host took anything.
  bool write_output();
  void close_fd(int& fd);

  bool opened_ = false;
  int master_ = -1;
  int slave_ = -1;
  int in_ = -1;   // the host's input pipe (the anchor's fd 0 at start)
  int out_ = -1;  // the host's output pipe (fd 1)
  std::string to_terminal_;
  std::string to_host_;
  // Which entries of the last add_pollfds are which (-1: not added).
  int poll_master_ = -1, poll_in_ = -1, poll_out_ = -1;
};

}  // namespace anchor
}  // namespace cordon
