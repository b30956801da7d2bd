// Windows: what both the addon (host.cc) and the anchor (anchor.h) need to
// know about a tree's Job Object: its limits, its members (JobObjectBasicProcessIdList,
// never a pid walk), their command lines, and GetLastError() as errno names.
#include "win.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace cordon {
namespace win {

int errno_from(DWORD error) {
  switch (error) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
    case ERROR_BAD_PATHNAME:
    case ERROR_MOD_NOT_FOUND:
      return ENOENT;
    case ERROR_DIRECTORY:
      return ENOTDIR;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
    case ERROR_BAD_EXE_FORMAT:
    case ERROR_EXE_MACHINE_TYPE_MISMATCH:
      return EACCES;
    case ERROR_PRIVILEGE_NOT_HELD:
    case ERROR_NOT_SUPPORTED:
      return EPERM;
    case ERROR_INVALID_HANDLE:
    case ERROR_INVALID_PARAMETER:
      return EINVAL;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
      return ENOMEM;
    case ERROR_TOO_MANY_OPEN_FILES:
      return EMFILE;
    case ERROR_CALL_NOT_IMPLEMENTED:
      return ENOSYS;
    case ERROR_ALREADY_EXISTS:
      return EEXIST;
    default:
      return EIO;
  }
}

std::string utf8(const std::wstring& w) {
  if (w.empty()) return std::string();
  int n = WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), nullptr, 0, nullptr, nullptr);
  std::string out(static_cast<size_t>(n > 0 ? n : 0), '\0');
  if (n > 0) WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), &out[0], n, nullptr, nullptr);
  return out;
}

std::wstring wide(const std::string& s) {
  if (s.empty()) return std::wstring();
  int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
  std::wstring out(static_cast<size_t>(n > 0 ? n : 0), L'\0');
  if (n > 0) MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), &out[0], n);
  return out;
}

bool own_sid(std::vector<unsigned char>& sid) {
  HANDLE token = nullptr;
  if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token)) return false;
  DWORD n = 0;
  GetTokenInformation(token, TokenUser, nullptr, 0, &n);
  std::vector<unsigned char> buf(n ? n : 1);
  bool ok = n && GetTokenInformation(token, TokenUser, buf.data(), n, &n);
  CloseHandle(token);
  if (!ok) return false;
  PSID user = reinterpret_cast<TOKEN_USER*>(buf.data())->User.Sid;
  if (!IsValidSid(user)) return false;
  sid.assign(static_cast<unsigned char*>(user), static_cast<unsigned char*>(user) + GetLengthSid(user));
  return true;
}

BOOL set_tree_limits(HANDLE job) {
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION info;
  ZeroMemory(&info, sizeof info);
  info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
  return SetInformationJobObject(job, JobObjectExtendedLimitInformation, &info, sizeof info);
}

bool has_tree_limits(HANDLE job) {
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION info;
  ZeroMemory(&info, sizeof info);
  if (!QueryInformationJobObject(job, JobObjectExtendedLimitInformation, &info, sizeof info, nullptr)) return false;
  DWORD flags = info.BasicLimitInformation.LimitFlags;
  return (flags & JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE) &&
         !(flags & (JOB_OBJECT_LIMIT_BREAKAWAY_OK | JOB_OBJECT_LIMIT_SILENT_BREAKAWAY_OK));
}

int job_pids(HANDLE job, std::vector<DWORD>& out) {
  out.clear();
  size_t capacity = 64;
  for (int attempt = 0; attempt < 8; attempt++) {
    size_t bytes = sizeof(JOBOBJECT_BASIC_PROCESS_ID_LIST) + capacity * sizeof(ULONG_PTR);
    std::vector<unsigned char> buf(bytes);
    auto* list = reinterpret_cast<JOBOBJECT_BASIC_PROCESS_ID_LIST*>(buf.data());
    BOOL ok = QueryInformationJobObject(job, JobObjectBasicProcessIdList, list, static_cast<DWORD>(bytes), nullptr);
    if (!ok && GetLastError() != ERROR_MORE_DATA) return -errno_from(GetLastError());
    if (ok && list->NumberOfProcessIdsInList >= list->NumberOfAssignedProcesses) {
      for (DWORD i = 0; i < list->NumberOfProcessIdsInList; i++) out.push_back(static_cast<DWORD>(list->ProcessIdList[i]));
      return 0;
    }
    capacity = (list->NumberOfAssignedProcesses > capacity ? list->NumberOfAssignedProcesses : capacity) * 2;
  }
  return -EAGAIN;
}

namespace {

// NtQueryInformationProcess(ProcessCommandLineInformation): Windows 8.1+,
// and Wine. Looked up at run time; the image path is the fallback.
typedef LONG(WINAPI* NtQueryInformationProcessFn)(HANDLE, ULONG, PVOID, ULONG, PULONG);
constexpr ULONG kProcessCommandLineInformation = 60;

struct UnicodeString {
  USHORT Length;
  USHORT MaximumLength;
  PWSTR Buffer;
};

std::wstring command_line(HANDLE process) {
  static NtQueryInformationProcessFn query = reinterpret_cast<NtQueryInformationProcessFn>(
      reinterpret_cast<void*>(GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtQueryInformationProcess")));
  if (query) {
    ULONG needed = 0;
    std::vector<unsigned char> buf(4096);
    LONG status = query(process, kProcessCommandLineInformation, buf.data(), static_cast<ULONG>(buf.size()), &needed);
    if (status != 0 && needed > buf.size() && needed < (1u << 20)) {
      buf.resize(needed);
      status = query(process, kProcessCommandLineInformation, buf.data(), static_cast<ULONG>(buf.size()), &needed);
    }
    if (status == 0) {
      auto* us = reinterpret_cast<UnicodeString*>(buf.data());
      if (us->Buffer && us->Length > 0) return std::wstring(us->Buffer, us->Length / sizeof(wchar_t));
    }
  }
  wchar_t image[MAX_PATH * 2];
  DWORD size = sizeof image / sizeof image[0];
  if (QueryFullProcessImageNameW(process, 0, image, &size)) return std::wstring(image, size);
  return std::wstring();
}

// The system's console host (%SystemRoot%\System32\conhost.exe): the
// process Windows starts beside a console program that has no console to
// share (a leased root, created with CREATE_NO_WINDOW; any member created
// with a console of its own), as that program's child and so in its job. It
// runs no code of the command's and ends with its last console client: a
// member's, never a member itself. Only a system directory's copy counts, and
// a user cannot put a program there.
bool is_console_host(HANDLE process) {
  static const std::wstring system_conhost = [] {
    wchar_t dir[MAX_PATH];
    UINT n = GetSystemDirectoryW(dir, MAX_PATH);
    return n > 0 && n < MAX_PATH ? std::wstring(dir, n) + L"\\conhost.exe" : std::wstring();
  }();
  if (system_conhost.empty()) return false;
  wchar_t image[MAX_PATH * 2];
  DWORD size = sizeof image / sizeof image[0];
  if (!QueryFullProcessImageNameW(process, 0, image, &size)) return false;
  return CompareStringOrdinal(image, static_cast<int>(size), system_conhost.c_str(), static_cast<int>(system_conhost.size()), TRUE) == CSTR_EQUAL;
}

}  // namespace

bool console_program(const std::wstring& path) {
  HANDLE f = CreateFileW(path.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING, 0, nullptr);
  if (f == INVALID_HANDLE_VALUE) return false;
  // IMAGE_DOS_HEADER's e_lfanew, then the PE signature, IMAGE_FILE_HEADER
  // (20 bytes) and the optional header's Subsystem (offset 68 in PE32 and PE32+).
  auto read_at = [f](LONG at, void* buf, DWORD n) {
    DWORD got = 0;
    return SetFilePointer(f, at, nullptr, FILE_BEGIN) != INVALID_SET_FILE_POINTER && ReadFile(f, buf, n, &got, nullptr) && got == n;
  };
  IMAGE_DOS_HEADER dos;
  DWORD signature = 0;
  WORD subsystem = 0;
  bool console = read_at(0, &dos, sizeof dos) && dos.e_magic == IMAGE_DOS_SIGNATURE && dos.e_lfanew > 0 &&
                 read_at(dos.e_lfanew, &signature, sizeof signature) && signature == IMAGE_NT_SIGNATURE &&
                 read_at(dos.e_lfanew + 4 + static_cast<LONG>(sizeof(IMAGE_FILE_HEADER)) + 68, &subsystem, sizeof subsystem) &&
                 subsystem == IMAGE_SUBSYSTEM_WINDOWS_CUI;
  CloseHandle(f);
  return console;
}

int list_job(HANDLE job, std::vector<Member>& out) {
  out.clear();
  std::vector<DWORD> pids;
  int rc = job_pids(job, pids);
  if (rc < 0) return rc;
  for (DWORD pid : pids) {
    // IsProcessInJob needs PROCESS_QUERY_INFORMATION under Wine; Windows
    // accepts the limited right, which protected processes still grant.
    HANDLE h = OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, pid);
    if (!h) h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, pid);
    if (!h) continue;
    BOOL in_job = FALSE;
    // The handle pins the process: if it is (still) in the job it is a member,
    // not a process that took over a recycled pid.
    if (IsProcessInJob(h, job, &in_job) && in_job && WaitForSingleObject(h, 0) == WAIT_TIMEOUT && !is_console_host(h)) {
      Member m;
      m.pid = pid;
      m.state = 'R';
      FILETIME created, exited, kernel, user;
      if (GetProcessTimes(h, &created, &exited, &kernel, &user)) {
        m.start_time = (static_cast<uint64_t>(created.dwHighDateTime) << 32) | created.dwLowDateTime;
      }
      m.command = utf8(command_line(h));
      out.push_back(std::move(m));
    }
    CloseHandle(h);
  }
  return 0;
}

int job_active(HANDLE job) {
  JOBOBJECT_BASIC_ACCOUNTING_INFORMATION info;
  ZeroMemory(&info, sizeof info);
  if (!QueryInformationJobObject(job, JobObjectBasicAccountingInformation, &info, sizeof info, nullptr)) {
    return -errno_from(GetLastError());
  }
  return static_cast<int>(info.ActiveProcesses);
}

bool under_wine() {
  HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
  return ntdll && GetProcAddress(ntdll, "wine_get_version") != nullptr;
}

namespace {

// Sets `next` as the job's extended limits; on success it becomes `info`.
DWORD set_extended(HANDLE job, JOBOBJECT_EXTENDED_LIMIT_INFORMATION& info, JOBOBJECT_EXTENDED_LIMIT_INFORMATION next) {
  if (!SetInformationJobObject(job, JobObjectExtendedLimitInformation, &next, sizeof next)) return GetLastError();
  info = next;
  return 0;
}

// The processors the CPU rate is a share of (every processor group).
int64_t processors() {
  DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
  if (n == 0) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    n = si.dwNumberOfProcessors;
  }
  return n > 0 ? n : 1;
}

}  // namespace

DWORD set_job_limits(HANDLE job, const JobLimits& want, JobLimits& applied) {
  applied = JobLimits();
  DWORD first = 0;
  // Each limit is added to what the job has. A Set replaces every flag, and
  // Wine's query answers all zeros (its limits cannot be read back), so the
  // tree's own kill-on-close (set_tree_limits) is always part of what is set.
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION info;
  ZeroMemory(&info, sizeof info);
  if (!QueryInformationJobObject(job, JobObjectExtendedLimitInformation, &info, sizeof info, nullptr)) ZeroMemory(&info, sizeof info);
  info.BasicLimitInformation.LimitFlags |= JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
  if (want.memory > 0) {
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION next = info;
    next.BasicLimitInformation.LimitFlags |= JOB_OBJECT_LIMIT_JOB_MEMORY;
    next.JobMemoryLimit = static_cast<SIZE_T>(want.memory);
    DWORD err = set_extended(job, info, next);
    if (!err) applied.memory = want.memory;
    if (err && !first) first = err;
  }
  if (want.processes > 0) {
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION next = info;
    next.BasicLimitInformation.LimitFlags |= JOB_OBJECT_LIMIT_ACTIVE_PROCESS;
    next.BasicLimitInformation.ActiveProcessLimit = static_cast<DWORD>(want.processes);
    DWORD err = want.processes > 0xFFFFFFFFLL ? ERROR_INVALID_PARAMETER : set_extended(job, info, next);
    if (!err) applied.processes = want.processes;
    if (err && !first) first = err;
  }
  if (want.cpu_quota_us > 0) {
    // CpuRate: cycles per 10000 of the whole machine's; a quota of q us per
    // 100 ms is q / 100000 cores, so q / 100000 / processors x 10000 =
    // q / (10 x processors), at least 1 and at most 10000 (every processor).
    int64_t n = processors();
    int64_t rate = (want.cpu_quota_us + 5 * n) / (10 * n);
    if (rate < 1) rate = 1;
    if (rate > 10000) rate = 10000;
    JOBOBJECT_CPU_RATE_CONTROL_INFORMATION info;
    ZeroMemory(&info, sizeof info);
    info.ControlFlags = JOB_OBJECT_CPU_RATE_CONTROL_ENABLE | JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP;
    info.CpuRate = static_cast<DWORD>(rate);
    if (SetInformationJobObject(job, JobObjectCpuRateControlInformation, &info, sizeof info)) {
      applied.cpu_quota_us = rate * 10 * n;
    } else if (!first) {
      first = GetLastError();
    }
  }
  return first;
}

JobUsage job_usage(HANDLE job) {
  JobUsage u;
  JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION acct;
  ZeroMemory(&acct, sizeof acct);
  // Wine 8 keeps no CPU times for a job (measured: 0 for a busy tree): not measured there.
  if (!under_wine() && QueryInformationJobObject(job, JobObjectBasicAndIoAccountingInformation, &acct, sizeof acct, nullptr)) {
    u.cpu_us = (acct.BasicInfo.TotalUserTime.QuadPart + acct.BasicInfo.TotalKernelTime.QuadPart) / 10;
  }
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION ext;
  ZeroMemory(&ext, sizeof ext);
  if (QueryInformationJobObject(job, JobObjectExtendedLimitInformation, &ext, sizeof ext, nullptr) && ext.PeakJobMemoryUsed > 0) {
    u.memory_peak = static_cast<int64_t>(ext.PeakJobMemoryUsed);
  }
  return u;
}

namespace {

bool token_info(HANDLE token, TOKEN_INFORMATION_CLASS what, std::vector<unsigned char>& buf) {
  DWORD n = 0;
  GetTokenInformation(token, what, nullptr, 0, &n);
  if (n == 0) return false;
  buf.assign(n, 0);
  return GetTokenInformation(token, what, buf.data(), n, &n) != FALSE;
}

// A SID's bytes, then a separator.
void add_sid(std::string& out, PSID sid) {
  if (sid && IsValidSid(sid)) out.append(static_cast<const char*>(sid), GetLengthSid(sid));
  out.push_back('|');
}

}  // namespace

bool token_identity(HANDLE process, std::string& out) {
  out.clear();
  HANDLE token = nullptr;
  if (!OpenProcessToken(process, TOKEN_QUERY, &token)) return false;
  std::vector<unsigned char> buf;
  bool ok = token_info(token, TokenUser, buf);
  if (ok) add_sid(out, reinterpret_cast<TOKEN_USER*>(buf.data())->User.Sid);
  if (ok && (ok = token_info(token, TokenGroups, buf))) {
    auto* g = reinterpret_cast<TOKEN_GROUPS*>(buf.data());
    for (DWORD i = 0; i < g->GroupCount; i++) {
      add_sid(out, g->Groups[i].Sid);
      out += std::to_string(g->Groups[i].Attributes) + "|";
    }
  }
  if (ok && (ok = token_info(token, TokenPrivileges, buf))) {
    auto* p = reinterpret_cast<TOKEN_PRIVILEGES*>(buf.data());
    for (DWORD i = 0; i < p->PrivilegeCount; i++) {
      out += std::to_string(p->Privileges[i].Luid.HighPart) + "." + std::to_string(p->Privileges[i].Luid.LowPart) + ":" +
             std::to_string(p->Privileges[i].Attributes) + "|";
    }
  }
  // (Wine answers no integrity level: a token without one is compared without it.)
  if (ok && token_info(token, TokenIntegrityLevel, buf)) add_sid(out, reinterpret_cast<TOKEN_MANDATORY_LABEL*>(buf.data())->Label.Sid);
  DWORD session = 0, n = 0;
  if (ok && GetTokenInformation(token, TokenSessionId, &session, sizeof session, &n)) out += "s" + std::to_string(session);
  DWORD err = ok ? 0 : GetLastError();
  CloseHandle(token);
  if (!ok) SetLastError(err);
  return ok;
}

}  // namespace win
}  // namespace cordon
