// Who still holds the tree's captured output: released.h says what it
// guarantees.
#include "released.h"

namespace cordon {
namespace anchor {

namespace {

using protocol::trace;

// The number of handles to `h`'s object (NtQueryObject
// ObjectBasicInformation), or -1.
long handle_count(HANDLE h) {
  struct BasicInformation {
    ULONG Attributes;
    ACCESS_MASK GrantedAccess;
    ULONG HandleCount;
    ULONG PointerCount;
    ULONG Reserved[10];
  };
  typedef LONG(WINAPI * NtQueryObjectFn)(HANDLE, int, PVOID, ULONG, PULONG);
  static NtQueryObjectFn query = reinterpret_cast<NtQueryObjectFn>(
      reinterpret_cast<void*>(GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtQueryObject")));
  if (!query) return -1;
  BasicInformation info;
  ZeroMemory(&info, sizeof info);
  ULONG n = 0;
  if (query(h, 0 /* ObjectBasicInformation */, &info, sizeof info, &n) != 0) return -1;
  return static_cast<long>(info.HandleCount);
}

}  // namespace

void ReleaseWatch::start(const std::vector<int>& fds) {
  HANDLE done[2] = {nullptr, nullptr};
  for (int fd : fds) {
    if (fd != 1 && fd != 2) continue;
    HANDLE h = GetStdHandle(fd == 1 ? STD_OUTPUT_HANDLE : STD_ERROR_HANDLE);
    if (!h || h == INVALID_HANDLE_VALUE || h == done[0] || h == done[1]) continue;
    done[fd - 1] = h;
    HANDLE dup = nullptr;
    if (!DuplicateHandle(GetCurrentProcess(), h, GetCurrentProcess(), &dup, 0, FALSE, DUPLICATE_SAME_ACCESS) ||
        handle_count(dup) < 0) {
      if (dup) CloseHandle(dup);
      trace("output holders cannot be counted: RELEASED waits for an empty job");
      countable_ = false;
      continue;
    }
    watched_.push_back(dup);
  }
}

void ReleaseWatch::check() {
  for (auto& h : watched_) {
    if (!h) continue;
    long n = handle_count(h);
    if (n >= 0 && n <= 1) {
      CloseHandle(h);
      h = nullptr;
    } else if (n < 0) {
      countable_ = false;
      CloseHandle(h);
      h = nullptr;
    }
  }
}

bool ReleaseWatch::released() const { return countable_ && !watching(); }

bool ReleaseWatch::watching() const {
  for (HANDLE h : watched_) {
    if (h) return true;
  }
  return false;
}

void ReleaseWatch::close() {
  for (HANDLE& h : watched_) {
    if (h) CloseHandle(h);
    h = nullptr;
  }
}

}  // namespace anchor
}  // namespace cordon
