// A warm anchor's LAUNCH (warm.h): reading it, and taking it.
#include "warm.h"

#include <tlhelp32.h>

#include <cstring>
#include <cwchar>

namespace cordon {
namespace anchor {
namespace warm {

namespace {

using protocol::trace;

// The header's longest form: "LAUNCH " and six numbers of up to 20 digits.
constexpr size_t kMaxHeader = 160;

// A decimal number without sign or leading zeros, at most `max`.
bool number(const std::string& s, uint64_t max, uint64_t& out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= line.size()) {
    size_t j = line.find(' ', i);
    if (j == std::string::npos) j = line.size();
    out.push_back(line.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace

Reader::Result Reader::next(std::string& line, Launch& out) {
  size_t nl = buf_.find('\n');
  if (nl == std::string::npos) {
    if (buf_.size() > kMaxHeader) {
      trace("warm: a line of more than %zu bytes before the LAUNCH", kMaxHeader);
      return kBad;
    }
    return kMore;
  }
  if (nl > kMaxHeader) {
    trace("warm: a line of more than %zu bytes before the LAUNCH", kMaxHeader);
    return kBad;
  }
  std::string first = buf_.substr(0, nl);
  if (!first.empty() && first.back() == '\r') first.pop_back();
  if (first.compare(0, 7, "LAUNCH ") != 0) {
    line = first;
    buf_.erase(0, nl + 1);
    return kLine;
  }
  std::vector<std::string> f = fields(first);
  uint64_t argc = 0, envc = 0, bytes = 0, h[3] = {0, 0, 0};
  if (f.size() != 7 || !number(f[1], 4096, argc) || argc < 4 || !number(f[2], 65536, envc) ||
      !number(f[3], kMaxLaunchBytes, bytes) || !number(f[4], UINT32_MAX, h[0]) || !number(f[5], UINT32_MAX, h[1]) ||
      !number(f[6], UINT32_MAX, h[2])) {
    trace("warm: malformed LAUNCH header");
    return kBad;
  }
  if (buf_.size() - (nl + 1) < bytes) return kMore;
  const char* p = buf_.data() + nl + 1;
  const char* end = p + bytes;
  if (bytes == 0 || end[-1] != '\0') {
    trace("warm: the LAUNCH body does not end its last string");
    return kBad;
  }
  std::vector<std::string> strings;
  while (p < end) {
    size_t n = strlen(p);  // (ends within the body: its last byte is NUL)
    strings.emplace_back(p, n);
    p += n + 1;
  }
  if (strings.size() != argc + envc) {
    trace("warm: the LAUNCH body holds %zu strings, not %llu", strings.size(),
          static_cast<unsigned long long>(argc + envc));
    return kBad;
  }
  for (size_t i = argc; i < strings.size(); i++) {
    size_t eq = strings[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      trace("warm: an environment entry without a name");
      return kBad;
    }
  }
  out.args.assign(strings.begin(), strings.begin() + static_cast<std::ptrdiff_t>(argc));
  out.env.assign(strings.begin() + static_cast<std::ptrdiff_t>(argc), strings.end());
  for (int i = 0; i < 3; i++) out.handles[i] = h[i];
  out.rest = buf_.substr(nl + 1 + bytes);
  buf_.clear();
  return kLaunch;
}

HostWatch::~HostWatch() {
  if (host_) CloseHandle(host_);
}

bool HostWatch::open() {
  DWORD parent = 0;
  HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  if (snap != INVALID_HANDLE_VALUE) {
    PROCESSENTRY32W pe;
    pe.dwSize = sizeof pe;
    for (BOOL more = Process32FirstW(snap, &pe); more; more = Process32NextW(snap, &pe)) {
      if (pe.th32ProcessID == GetCurrentProcessId()) parent = pe.th32ParentProcessID;
    }
    CloseHandle(snap);
  }
  host_ = parent ? OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, parent) : nullptr;
  if (!host_) {
    trace("warm: the host (pid %lu) cannot be opened: error %lu", parent, GetLastError());
    return false;
  }
  FILETIME host_start, own_start, t1, t2, t3;
  if (!GetProcessTimes(host_, &host_start, &t1, &t2, &t3) || !GetProcessTimes(GetCurrentProcess(), &own_start, &t1, &t2, &t3) ||
      CompareFileTime(&host_start, &own_start) > 0) {
    trace("warm: pid %lu is not the host (started after this anchor)", parent);
    return false;
  }
  // The host's priority class when it started this anchor (the host says it:
  // read here, it could already be one the host took since).
  wchar_t given[16];
  DWORD n = GetEnvironmentVariableW(L"CORDON_WARM_HOST_PRIORITY_CLASS", given, 16);
  wchar_t* end = nullptr;
  priority_ = n > 0 && n < 16 ? static_cast<DWORD>(wcstoul(given, &end, 10)) : 0;
  if (!end || *end != L'\0' || priority_ == 0) {
    trace("warm: no priority class of the host's in CORDON_WARM_HOST_PRIORITY_CLASS");
    return false;
  }
  if (!win::token_identity(GetCurrentProcess(), own_)) {
    trace("warm: the anchor's own token cannot be read: error %lu", GetLastError());
    return false;
  }
  return unchanged();
}

bool HostWatch::unchanged() {
  std::string now;
  if (!host_ || WaitForSingleObject(host_, 0) != WAIT_TIMEOUT || !win::token_identity(host_, now)) {
    trace("warm: the host is gone or its token cannot be read (error %lu)", GetLastError());
    return false;
  }
  if (now != own_ || GetPriorityClass(host_) != priority_) {
    trace("warm: the host's token or priority class is not this anchor's any more: no command runs");
    return false;
  }
  return true;
}

bool become(const Launch& launch, const HANDLE channel[2]) {
  HANDLE std_handles[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; i++) {
    if (launch.handles[i] == 0) continue;
    HANDLE h = reinterpret_cast<HANDLE>(static_cast<uintptr_t>(launch.handles[i]));
    DWORD flags = 0;
    if (h == channel[0] || h == channel[1] || !GetHandleInformation(h, &flags)) {
      trace("warm: stdio handle %d (%p) is not one the host gave", i, h);
      return false;
    }
    SetLastError(0);
    DWORD type = GetFileType(h);
    if (type != FILE_TYPE_PIPE && type != FILE_TYPE_CHAR && type != FILE_TYPE_DISK) {
      trace("warm: stdio handle %d (%p) is no file, pipe or device (type %lu, error %lu)", i, h, type, GetLastError());
      return false;
    }
    std_handles[i] = h;
  }
  // The environment: exactly the LAUNCH's, as a cold anchor's is what the
  // host started it with (the command inherits it).
  std::vector<std::wstring> names;
  if (wchar_t* block = GetEnvironmentStringsW()) {
    for (const wchar_t* e = block; *e; e += wcslen(e) + 1) {
      const wchar_t* eq = wcschr(e + 1, L'=');  // (a name may begin with '=': =C:=C:\...)
      if (eq) names.emplace_back(e, static_cast<size_t>(eq - e));
    }
    FreeEnvironmentStringsW(block);
  }
  for (const auto& n : names) SetEnvironmentVariableW(n.c_str(), nullptr);
  for (const auto& entry : launch.env) {
    std::wstring w = win::wide(entry);
    size_t eq = w.find(L'=');
    if (eq == std::wstring::npos || eq == 0 || !SetEnvironmentVariableW(w.substr(0, eq).c_str(), w.c_str() + eq + 1)) {
      trace("warm: cannot set an environment entry (error %lu)", GetLastError());
      return false;
    }
  }
  // The command's stdio replaces the NUL handles the warm anchor started with.
  const DWORD ids[3] = {STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE};
  HANDLE seen[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; i++) {
    HANDLE old = GetStdHandle(ids[i]);
    bool dup = false;
    for (int j = 0; j < i; j++) dup = dup || seen[j] == old;
    seen[i] = old;
    if (old && old != INVALID_HANDLE_VALUE && !dup && old != channel[0] && old != channel[1]) CloseHandle(old);
    if (std_handles[i]) SetHandleInformation(std_handles[i], HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
    SetStdHandle(ids[i], std_handles[i]);
  }
  trace("warm: LAUNCH taken (%zu arguments, %zu environment entries)", launch.args.size(), launch.env.size());
  return true;
}

}  // namespace warm
}  // namespace anchor
}  // namespace cordon
