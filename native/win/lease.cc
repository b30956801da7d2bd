// A leased anchor's endpoint: lease.h says what it guarantees (and
// native/protocol.h "Leases: Windows" what it says on the wire). The anchor's
// control loop (control.cc) decides what the lease means for the tree; this
// file carries the means: the pipe, its clients, the hand-over of the
// control channel and of the relayed output.
#include "lease.h"

#include <vector>

namespace cordon {
namespace win {

HANDLE create_lease_pipe(const std::wstring& name, bool first, DWORD& err) {
  err = 0;
  std::vector<unsigned char> sid;
  if (!own_sid(sid)) {
    err = GetLastError() ? GetLastError() : ERROR_ACCESS_DENIED;
    return INVALID_HANDLE_VALUE;
  }
  DWORD acl_size = sizeof(ACL) + sizeof(ACCESS_ALLOWED_ACE) + static_cast<DWORD>(sid.size());
  std::vector<unsigned char> acl_buf(acl_size);
  PACL acl = reinterpret_cast<PACL>(acl_buf.data());
  SECURITY_DESCRIPTOR sd;
  if (!InitializeAcl(acl, acl_size, ACL_REVISION) ||
      !AddAccessAllowedAce(acl, ACL_REVISION, GENERIC_READ | GENERIC_WRITE | FILE_CREATE_PIPE_INSTANCE | SYNCHRONIZE,
                           sid.data()) ||
      !InitializeSecurityDescriptor(&sd, SECURITY_DESCRIPTOR_REVISION) || !SetSecurityDescriptorDacl(&sd, TRUE, acl, FALSE) ||
      !SetSecurityDescriptorControl(&sd, SE_DACL_PROTECTED, SE_DACL_PROTECTED)) {
    err = GetLastError();
    return INVALID_HANDLE_VALUE;
  }
  SECURITY_ATTRIBUTES sa = {sizeof sa, &sd, FALSE};
  HANDLE pipe = CreateNamedPipeW(name.c_str(),
                                 PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | (first ? FILE_FLAG_FIRST_PIPE_INSTANCE : 0),
                                 PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
                                 PIPE_UNLIMITED_INSTANCES, 4096, 4096, 0, &sa);
  if (pipe == INVALID_HANDLE_VALUE) err = GetLastError();
  return pipe;
}

}  // namespace win

namespace anchor {

namespace {

using protocol::trace;

constexpr int kHelloMs = 5000;  // how long a client of the lease endpoint has to send its line

}  // namespace

// A client of the lease endpoint, until its one line is read.
struct Endpoint::Client {
  OVERLAPPED ov;
  HANDLE pipe = INVALID_HANDLE_VALUE;
  char buf[128];
  std::string line;
  int64_t deadline = 0;
  bool reading = false;  // a read is pending (the struct lives until it completes)
};

DWORD Endpoint::open(HANDLE port, const std::string& id, int grace_ms) {
  port_ = port;
  grace_ms_ = grace_ms;
  wchar_t pid[16];
  swprintf(pid, 16, L"%lu", GetCurrentProcessId());
  name_ = L"\\\\.\\pipe\\cordon-lease-";
  name_ += pid;
  name_ += L'-';
  name_ += win::wide(id);
  DWORD err = 0;
  if (!listen_next(true, err)) {
    trace("lease endpoint: error %lu", err);
    return err;
  }
  trace("lease endpoint %s", win::utf8(name_).c_str());
  return 0;
}

// A new instance of the endpoint, waiting for its client.
bool Endpoint::listen_next(bool first, DWORD& err) {
  HANDLE pipe = win::create_lease_pipe(name_, first, err);
  if (pipe == INVALID_HANDLE_VALUE) return false;
  if (!CreateIoCompletionPort(pipe, port_, kKeyEndpoint, 0)) {
    err = GetLastError();
    CloseHandle(pipe);
    return false;
  }
  listen_ = pipe;
  ZeroMemory(&listen_ov_, sizeof listen_ov_);
  if (!ConnectNamedPipe(pipe, &listen_ov_)) {
    DWORD e = GetLastError();
    if (e == ERROR_PIPE_CONNECTED) {
      PostQueuedCompletionStatus(port_, 0, kKeyEndpoint, &listen_ov_);
    } else if (e != ERROR_IO_PENDING) {
      trace("ConnectNamedPipe: error %lu", e);
    }
  }
  return true;
}

bool Endpoint::handle(BOOL ok, DWORD bytes, OVERLAPPED* ov) {
  if (ov == &listen_ov_) {
    on_connect(ok);
  } else if (ov && client_ && ov == &client_->ov) {
    on_client_read(client_, ok, bytes);
  } else if (ov && abandoned_.count(CONTAINING_RECORD(ov, Client, ov))) {
    // A refused client's read, cancelled by closing it.
    Client* c = CONTAINING_RECORD(ov, Client, ov);
    abandoned_.erase(c);
    delete c;
  } else {
    return false;
  }
  return true;
}

bool Endpoint::owns(OVERLAPPED* ov) const {
  return ov == &listen_ov_ || (client_ && ov == &client_->ov) || abandoned_.count(CONTAINING_RECORD(ov, Client, ov));
}

void Endpoint::tick(int64_t now) {
  if (client_ && now >= client_->deadline) {
    trace("endpoint: no line from the client in time");
    Client* c = client_;
    end_client(c, "hello");
  }
}

DWORD Endpoint::wait_ms(int64_t now, DWORD timeout) const {
  if (client_) {
    int64_t left = client_->deadline - now;
    DWORD until = static_cast<DWORD>(left < 0 ? 0 : left);
    if (until < timeout) timeout = until;
  }
  return timeout;
}

// A client connected to the listening instance: read its line; the next
// instance listens once this one's client is answered.
void Endpoint::on_connect(BOOL ok) {
  HANDLE pipe = listen_;
  listen_ = nullptr;
  if (!pipe) return;
  if (!ok && GetLastError() != ERROR_PIPE_CONNECTED) {
    // (A client that came and went before we saw it.)
    CloseHandle(pipe);
    listen_again();
    return;
  }
  auto* c = new Client();
  c->pipe = pipe;
  c->deadline = now_ms() + kHelloMs;
  client_ = c;
  read_client(c);
}

// (Also once the lease ran out: an instance answers until the anchor exits,
// DENIED expired to ADOPT, so the name is never free while the anchor lives.)
void Endpoint::listen_again() {
  if (listen_) return;
  DWORD err = 0;
  if (!listen_next(false, err)) trace("lease endpoint: no new instance (error %lu)", err);
}

void Endpoint::read_client(Client* c) {
  ZeroMemory(&c->ov, sizeof c->ov);
  c->reading = true;
  if (!ReadFile(c->pipe, c->buf, sizeof c->buf, nullptr, &c->ov) && GetLastError() != ERROR_IO_PENDING) {
    c->reading = false;
    end_client(c, nullptr);
  }
}

void Endpoint::on_client_read(Client* c, BOOL ok, DWORD bytes) {
  c->reading = false;
  if (!ok || bytes == 0) {
    end_client(c, nullptr);
    return;
  }
  c->line.append(c->buf, bytes);
  size_t nl = c->line.find('\n');
  if (nl == std::string::npos) {
    if (c->line.size() > protocol::kMaxControlLine) end_client(c, "hello");
    else read_client(c);
    return;
  }
  std::string line = c->line.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::string token;
  int fd = 0;
  if (protocol::parse_output(line, token, fd)) {
    if (!protocol::same_token(token, lease_.token)) {
      end_client(c, "token");
    } else {
      give_output(c, fd);
    }
    return;
  }
  auto cmd = protocol::parse_command(line, grace_ms_, false);
  switch (cmd.verb) {
    case protocol::Verb::kInfo: {
      int64_t left = host_.attached() ? -1 : (lease_.deadline > now_ms() ? lease_.deadline - now_ms() : 0);
      trace("endpoint: INFO");
      end_client(c, nullptr, protocol::lease_info(left, host_.root_running()));
      return;
    }
    case protocol::Verb::kAdopt:
      if (!protocol::same_token(cmd.arg, lease_.token)) {
        trace("endpoint: ADOPT with a wrong token");
        end_client(c, "token");
      } else if (host_.attached()) {
        trace("endpoint: ADOPT while a host is attached");
        end_client(c, "attached");
      } else if (lease_.state == Lease::State::kExpired) {
        end_client(c, "expired");
      } else {
        adopt(c);
      }
      return;
    default:
      end_client(c, "hello");
      return;
  }
}

// Answers a client (`denied`: DENIED <why>; else `answer`, if any) and
// closes its instance once the answer is written; the next instance listens.
void Endpoint::end_client(Client* c, const char* denied, const std::string& answer) {
  if (client_ == c) client_ = nullptr;
  listen_again();
  std::string line = denied ? protocol::denied(denied) : answer;
  HANDLE pipe = c->pipe;
  c->pipe = INVALID_HANDLE_VALUE;
  if (line.empty() || !host_.write(pipe, line, pipe)) CloseHandle(pipe);
  if (c->reading) {
    abandoned_.insert(c);  // freed when its read completes (cancelled by the close)
  } else {
    delete c;
  }
}

// The client becomes the tree's host: ADOPTED, the replay, then the
// connection is the control channel.
void Endpoint::adopt(Client* c) {
  client_ = nullptr;
  HANDLE pipe = c->pipe;
  delete c;
  host_.adopt(pipe);
  listen_again();
}

// OUTPUT <token> <fd>: the adopter's connection for one stream.
void Endpoint::give_output(Client* c, int fd) {
  Relay* relay = relays_.find(fd);
  // Only for the host that adopted the tree (the first host reads its own
  // pipes), and only a stream the anchor relays.
  if (!relay || !host_.adopted()) {
    end_client(c, relay ? "attached" : "stream");
    return;
  }
  // The relay holds its lock while it copies a chunk; never wait long here
  // on one blocked writing to an earlier OUTPUT reader that does not read.
  if (!relay->lock(1000)) {
    end_client(c, "busy");
    return;
  }
  if (client_ == c) client_ = nullptr;
  listen_again();
  HANDLE pipe = c->pipe;
  delete c;
  relay->hand_over(pipe, protocol::output_ack(fd));
  trace("endpoint: OUTPUT %d", fd);
}

}  // namespace anchor
}  // namespace cordon
