// A leased anchor (protocol.h, its header and "Leases: Windows"): the lease's
// state, which the control loop drives, whether the lease can hold where the
// anchor runs (lease_job.cc), and the endpoint (lease.cc), the named pipe an
// adopting host connects to.
//
// With --lease the host starts the anchor detached (so that Node's own
// kill-on-close job, which ends every non-detached child with the host,
// leaves it alone) and sends `LEASE <ms> <token>` after JOB. The job
// survives the host: the host's handle closes with it, the anchor's keeps the
// job (and its kill-on-close) alive. Control EOF then starts the lease clock
// instead of the teardown; at its end the teardown runs as at EOF without a
// lease. Meanwhile the anchor listens on its endpoint for ADOPT/INFO, and
// keeps every line it sent so an adopter gets the tree's life so far
// (replay) before the connection becomes its control channel.
//
// Who may connect: the pipe's DACL holds one ACE, granting the anchor's own
// user SID (from its process token) read, write and new instances; it is
// protected (nothing inherited) and replaces the default DACL, which would
// also admit SYSTEM, Administrators and the logon session. The first
// instance is created with FILE_FLAG_FIRST_PIPE_INSTANCE: if a pipe of that
// name exists already (anyone's), creation fails rather than joining it.
// PIPE_REJECT_REMOTE_CLIENTS: local clients only. There is always an
// instance from the first on until the anchor exits, after its lease ran
// out too (ADOPT is then DENIED expired), so the name never lapses for
// someone else to take while the anchor is alive: the next one listens once
// a client is answered. (The adopter checks the server's pid against the
// lease record as well, lib/anchor/windows-endpoint.ts: the name is free
// again once the anchor has exited.) A client has 5 s (kHelloMs) to send its
// one line (DENIED hello otherwise); one client's line is read at a time.
#pragma once

#include "anchor.h"
#include "relay.h"

#include <set>
#include <string>

namespace cordon {
namespace anchor {

// The lease, as the control loop keeps it.
struct Lease {
  enum class State {
    kNone,      // not leased (no --lease): the host's EOF ends the tree
    kAwaiting,  // --lease, and no LEASE line yet: the command does not start
    kHeld,      // the lease holds the tree: the host's EOF starts its clock
    kExpired,   // the clock ran out with no host: the teardown; ADOPT is DENIED expired
  };
  State state = State::kNone;
  int ms = 0;            // from the LEASE line
  std::string token;     // the adoption token (LEASE line)
  int64_t deadline = 0;  // while no host is attached
};

// Whether the lease can outlive the host, asked by the leased anchor itself
// once it has its LEASE line and before anything of the command exists (the
// host's own job says nothing of it: Node puts itself in a job of its own,
// libuv's, kill-on-close with silent breakaway, at its first non-detached
// spawn, and its detached child leaves that job and every job above it that
// lets it go silently, up to the first that does not, where it stays).
// What the anchor can read is its own chain's immediate job, the innermost
// job that kept it: IsProcessInJob, then QueryInformationJobObject(NULL,
// JobObjectExtendedLimitInformation). A job above that one is not readable.
struct OwnJob {
  bool in_job = false;       // in any job at all
  bool limits_read = false;  // the immediate job's limits were read
  DWORD limit_flags = 0;     // its LimitFlags
  bool test_hook = false;    // the flags came from CORDON_TEST_JOB_LIMITS (test builds only)
};
OwnJob read_own_job();
// 0 when a lease can hold: the anchor is in no job, or its immediate job
// does not kill its members when it closes (or its limits could not be
// read: nothing is known against it). Else that job's LimitFlags: it has
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE (a service wrapper's, a CI agent's
// job), so the anchor would end when the job's owner closes it. The job's
// breakaway flags do not count: they are about the anchor's children, and
// the anchor is in the job already.
DWORD lease_refused_by(const OwnJob& job);

// What the endpoint asks of its anchor.
class EndpointHost {
 public:
  virtual ~EndpointHost() = default;
  // A host holds the control channel (INFO then reports no time left: -1).
  virtual bool attached() const = 0;
  // The host attached is one that adopted the tree (OUTPUT is for it only).
  virtual bool adopted() const = 0;
  // The root has not exited (INFO).
  virtual bool root_running() const = 0;
  // The client that said ADOPT becomes the tree's host: ADOPTED, the replay,
  // then `pipe` is its control channel (both ways).
  virtual void adopt(HANDLE pipe) = 0;
  // One overlapped write of `line` to `pipe` (associated with the port),
  // `close_after` closed once it is done. false: it failed at once.
  virtual bool write(HANDLE pipe, const std::string& line, HANDLE close_after) = 0;
};

class Endpoint {
 public:
  Endpoint(EndpointHost& host, const Lease& lease, const Relays& relays)
      : host_(host), lease_(lease), relays_(relays) {}
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // The endpoint's first instance, \\.\pipe\cordon-lease-<pid>-<id>, its
  // completions posted to `port` under kKeyEndpoint, before anything runs
  // (`grace_ms`: the teardown grace, as control lines are parsed with it).
  // 0, or the error (traced).
  DWORD open(HANDLE port, const std::string& id, int grace_ms);
  // A completion under kKeyEndpoint that is the endpoint's own (a client
  // connected, a client's line read, a refused client's read cancelled):
  // handled, true. Writes and an adopter's control reads are not its own.
  bool handle(BOOL ok, DWORD bytes, OVERLAPPED* ov);
  // Whether `ov` is one of its own (at exit, where nothing more is handled).
  bool owns(OVERLAPPED* ov) const;
  // A client whose line has not come by its deadline is refused.
  void tick(int64_t now);
  // `timeout`, or less so that the loop wakes at a client's deadline.
  DWORD wait_ms(int64_t now, DWORD timeout) const;

 private:
  struct Client;
  bool listen_next(bool first, DWORD& err);
  void listen_again();
  void on_connect(BOOL ok);
  void read_client(Client* c);
  void on_client_read(Client* c, BOOL ok, DWORD bytes);
  void end_client(Client* c, const char* denied, const std::string& answer = std::string());
  void adopt(Client* c);
  void give_output(Client* c, int fd);

  EndpointHost& host_;
  const Lease& lease_;
  const Relays& relays_;
  HANDLE port_ = nullptr;
  int grace_ms_ = 0;
  std::wstring name_;
  HANDLE listen_ = nullptr;      // the instance waiting for a client
  OVERLAPPED listen_ov_;
  Client* client_ = nullptr;     // the client whose line is being read
  std::set<Client*> abandoned_;  // refused clients whose cancelled read is still to come
};

}  // namespace anchor
}  // namespace cordon
