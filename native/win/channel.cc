// The anchor's control channel: channel.h says what it guarantees.
#include "channel.h"

#include <cstring>

namespace cordon {
namespace anchor {

namespace {

struct WriteOp {
  OVERLAPPED ov;
  std::string data;
  uint64_t gen = 0;              // which host's channel it was written to
  HANDLE close_after = nullptr;  // a refused endpoint client: closed once its answer is written
};

}  // namespace

HANDLE crt_handle(int fd) {
  STARTUPINFOW si;
  GetStartupInfoW(&si);
  if (si.cbReserved2 < sizeof(int) || !si.lpReserved2) return INVALID_HANDLE_VALUE;
  const unsigned char* p = si.lpReserved2;
  int count;
  memcpy(&count, p, sizeof count);
  if (count <= fd || si.cbReserved2 < sizeof(int) + static_cast<size_t>(count) * (1 + sizeof(HANDLE))) {
    return INVALID_HANDLE_VALUE;
  }
  HANDLE h;
  memcpy(&h, p + sizeof(int) + count + static_cast<size_t>(fd) * sizeof(HANDLE), sizeof h);
  return h;
}

bool Writer::write(HANDLE pipe, const std::string& line, HANDLE close_after) {
  auto* op = new WriteOp();
  ZeroMemory(&op->ov, sizeof op->ov);
  op->data = line;
  op->close_after = close_after;
  op->gen = gen_;
  if (!WriteFile(pipe, op->data.data(), static_cast<DWORD>(op->data.size()), nullptr, &op->ov) &&
      GetLastError() != ERROR_IO_PENDING) {
    protocol::trace("write: error %lu", GetLastError());
    delete op;
    return false;
  }
  pending_++;
  return true;
}

bool Writer::done(BOOL ok, OVERLAPPED* ov) {
  auto* op = reinterpret_cast<WriteOp*>(ov);
  if (op->close_after) CloseHandle(op->close_after);
  bool failed = !ok && op->gen == gen_;
  delete op;
  pending_--;
  return failed;
}

}  // namespace anchor
}  // namespace cordon
