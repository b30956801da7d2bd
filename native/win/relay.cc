// A leased tree's captured output, copied by the anchor: relay.h says what it
// guarantees.
#include "relay.h"

namespace cordon {
namespace anchor {

namespace {

using protocol::trace;

// One synchronous write to a handle opened overlapped, with no completion
// packet (the event's low bit set).
bool write_all(HANDLE h, const char* p, DWORD n) {
  HANDLE ev = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  if (!ev) return false;
  bool ok = true;
  while (ok && n > 0) {
    OVERLAPPED ov;
    ZeroMemory(&ov, sizeof ov);
    ov.hEvent = reinterpret_cast<HANDLE>(reinterpret_cast<ULONG_PTR>(ev) | 1);
    DWORD done = 0;
    if (!WriteFile(h, p, n, &done, &ov)) {
      ok = GetLastError() == ERROR_IO_PENDING && GetOverlappedResult(h, &ov, &done, TRUE);
    } else {
      ok = GetOverlappedResult(h, &ov, &done, TRUE) != 0;
    }
    p += done;
    n -= done;
  }
  CloseHandle(ev);
  return ok;
}

}  // namespace

void Relay::copy(const char* buf, DWORD n) {
  EnterCriticalSection(&mu_);
  if (host_) {
    DWORD done = 0;
    const char* p = buf;
    DWORD left = n;
    while (host_ && left > 0) {
      if (!WriteFile(host_, p, left, &done, nullptr)) {
        trace("relay %d: the host's pipe is gone (error %lu): output to the log", fd_, GetLastError());
        CloseHandle(host_);
        host_ = nullptr;
      }
      p += done;
      left -= done;
    }
    if (left == 0) {
      LeaveCriticalSection(&mu_);
      return;
    }
    buf = p;
    n = left;
  }
  if (log_) {
    EnterCriticalSection(log_mu_);
    DWORD done = 0;
    WriteFile(log_, buf, n, &done, nullptr);
    LeaveCriticalSection(log_mu_);
  }
  if (sink_ && !write_all(sink_, buf, n)) {
    CloseHandle(sink_);
    sink_ = nullptr;
  }
  LeaveCriticalSection(&mu_);
}

DWORD WINAPI Relay::run(LPVOID self) {
  auto* r = static_cast<Relay*>(self);
  char buf[16384];
  DWORD n = 0;
  while (ReadFile(r->read_, buf, sizeof buf, &n, nullptr) && n > 0) r->copy(buf, n);
  // The tree's writers are gone: EOF to whoever reads the stream.
  EnterCriticalSection(&r->mu_);
  if (r->host_) CloseHandle(r->host_);
  if (r->sink_) CloseHandle(r->sink_);
  r->host_ = r->sink_ = nullptr;
  LeaveCriticalSection(&r->mu_);
  return 0;
}

bool Relay::lock(int64_t ms) {
  bool locked = false;
  for (int64_t until = now_ms() + ms; !(locked = TryEnterCriticalSection(&mu_)) && now_ms() < until;) Sleep(5);
  return locked;
}

void Relay::hand_over(HANDLE pipe, const std::string& ack) {
  if (sink_) CloseHandle(sink_);
  sink_ = write_all(pipe, ack.data(), static_cast<DWORD>(ack.size())) ? pipe : nullptr;
  if (!sink_) CloseHandle(pipe);
  LeaveCriticalSection(&mu_);
}

void Relays::start(const Options& o) {
  if (!o.log.empty()) {
    log_ = CreateFileW(o.log.c_str(), FILE_APPEND_DATA, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                       nullptr, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (log_ == INVALID_HANDLE_VALUE) {
      trace("log %s: error %lu (output with no host attached is lost)", win::utf8(o.log).c_str(), GetLastError());
      log_ = nullptr;
    }
  }
  InitializeCriticalSection(&log_mu_);
  for (int fd : o.watch_fds) {
    if (fd != 1 && fd != 2) continue;
    DWORD id = fd == 1 ? STD_OUTPUT_HANDLE : STD_ERROR_HANDLE;
    HANDLE h = GetStdHandle(id);
    if (!h || h == INVALID_HANDLE_VALUE || GetFileType(h) != FILE_TYPE_PIPE) continue;
    Relay* shared = nullptr;
    for (auto* r : relays_) {
      if (r->host_ == h) shared = r;
    }
    if (shared) {  // stdout and stderr are one pipe: one relay
      SetStdHandle(id, GetStdHandle(shared->fd_ == 1 ? STD_OUTPUT_HANDLE : STD_ERROR_HANDLE));
      continue;
    }
    SECURITY_ATTRIBUTES sa = {sizeof sa, nullptr, TRUE};
    HANDLE r = nullptr, w = nullptr;
    if (!CreatePipe(&r, &w, &sa, 0)) {
      trace("relay %d: CreatePipe error %lu (the host's pipe is used directly)", fd, GetLastError());
      continue;
    }
    SetHandleInformation(r, HANDLE_FLAG_INHERIT, 0);
    SetHandleInformation(h, HANDLE_FLAG_INHERIT, 0);  // the command gets the anchor's pipe, never the host's
    auto* relay = new Relay(fd);
    relay->read_ = r;
    relay->host_ = h;
    relay->log_ = log_;
    relay->log_mu_ = &log_mu_;
    InitializeCriticalSection(&relay->mu_);
    SetStdHandle(id, w);
    relay->thread_ = CreateThread(nullptr, 64 * 1024, Relay::run, relay, 0, nullptr);
    relays_.push_back(relay);
  }
}

Relay* Relays::find(int fd) const {
  Relay* relay = nullptr;
  for (auto* r : relays_) {
    if (r->fd_ == fd) relay = r;
  }
  return relay;
}

void Relays::wait() {
  int64_t until = now_ms() + 2000;
  for (auto* r : relays_) {
    int64_t left = until - now_ms();
    if (r->thread_) WaitForSingleObject(r->thread_, static_cast<DWORD>(left < 0 ? 0 : left));
  }
}

}  // namespace anchor
}  // namespace cordon
