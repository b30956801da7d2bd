// Windows, the host's side of the contract (cordon.h), in the addon: the
// host's handle on each tree's Job Object, member listing through that
// handle, and the probe. (The Job Object queries it shares with the anchor
// are job_object.cc.)
//
// Which handle decides (see also native/win/anchor.cc):
// - The host creates the job here, unnamed (so nothing can open it by name),
//   not inheritable, with kill-on-close and no breakaway, before the anchor
//   anchor exists. job_attach duplicates a handle into the anchor (the host's
//   unreaped child, so its pid is pinned) with only the rights the anchor
//   uses; lib/anchor/windows.ts sends its value as the first control line.
//   A process of the same user can still open the host or the anchor itself
//   (PROCESS_DUP_HANDLE) and copy a handle out: same-user processes are not a
//   security boundary on Windows without a restricted token for the command.
// - While host and anchor live, the anchor carries out TERM/KILL with
//   TerminateJobObject and reports QUIET from the job's completion port.
// - If the anchor dies first, the host still holds this handle: lib/anchor/windows.ts
//   terminates the job through it (job_terminate) before reporting the loss.
// - If the host dies by any means, the kernel closes this handle; Node's own
//   kill-on-close job ends the anchor with it, and the anchor's handle was the
//   last one: KILL_ON_JOB_CLOSE kills the tree. An anchor that outlives the host
//   (not in Node's job) sees control EOF and terminates the job itself.
#include <cerrno>
#include <map>
#include <mutex>

#include "win.h"

#include <aclapi.h>
#include <sddl.h>

// libuv, exported by node.exe (and by every Node-API host built on it): a
// descriptor of the host's own C runtime for an OS handle (the addon's C
// runtime is another one: its descriptors mean nothing to Node).
extern "C" int uv_open_osfhandle(HANDLE os_fd);
// (and the handle behind one of its descriptors: a host's fd 0-2, for 'inherit')
extern "C" HANDLE uv_get_osfhandle(int fd);

namespace cordon {

namespace {

std::mutex g_mu;
std::map<int64_t, HANDLE> g_by_anchor;  // anchor pid -> job handle

HANDLE as_handle(uint64_t h) { return reinterpret_cast<HANDLE>(static_cast<uintptr_t>(h)); }

}  // namespace

int probe(Probe& out) {
  out = Probe();
  out.job_objects = true;
  out.wine = win::under_wine();
  // Wine 8 answers GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT) with
  // ERROR_CALL_NOT_IMPLEMENTED: no graceful stop there.
  out.ctrl_break = !out.wine;
  HMODULE k = GetModuleHandleW(L"kernel32.dll");
  out.pseudo_console = k && GetProcAddress(k, "CreatePseudoConsole") && GetProcAddress(k, "ResizePseudoConsole") &&
                       GetProcAddress(k, "ClosePseudoConsole");
  out.proc_scan = true;
  return 0;
}

int become_subreaper() { return -ENOSYS; }

int control_pair(int fds[2]) {
  // Windows uses a pipe Node creates at stdio index 3 (lib/anchor/windows.ts).
  fds[0] = fds[1] = -1;
  return -ENOSYS;
}

int job_create(uint64_t& handle_out) {
  SECURITY_ATTRIBUTES sa = {sizeof sa, nullptr, FALSE};  // never inherited by other children of the host
  HANDLE job = CreateJobObjectW(&sa, nullptr);           // no name: nobody opens it by name
  if (!job) return -win::errno_from(GetLastError());
  if (!win::set_tree_limits(job)) {
    int err = win::errno_from(GetLastError());
    CloseHandle(job);
    return -err;
  }
  handle_out = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(job));
  return 0;
}

int job_attach(uint64_t handle, int64_t anchor_pid, uint64_t& remote_out) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_by_anchor[anchor_pid] = as_handle(handle);
  }
  remote_out = 0;
  HANDLE anchor = OpenProcess(PROCESS_DUP_HANDLE, FALSE, static_cast<DWORD>(anchor_pid));
  if (!anchor) return -win::errno_from(GetLastError());
  HANDLE remote = nullptr;
  // Exactly what the anchor uses: assign, terminate, list, completion port.
  BOOL ok = DuplicateHandle(GetCurrentProcess(), as_handle(handle), anchor, &remote,
                            JOB_OBJECT_ASSIGN_PROCESS | JOB_OBJECT_TERMINATE | JOB_OBJECT_QUERY |
                                JOB_OBJECT_SET_ATTRIBUTES,
                            FALSE, 0);
  DWORD err = ok ? 0 : GetLastError();
  CloseHandle(anchor);
  if (!ok) return -win::errno_from(err);
  remote_out = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(remote));
  return 0;
}

int job_terminate(uint64_t handle, uint32_t exit_code) {
  if (!TerminateJobObject(as_handle(handle), exit_code)) return -win::errno_from(GetLastError());
  return 0;
}

int job_active_count(uint64_t handle) { return win::job_active(as_handle(handle)); }

int job_close(uint64_t handle) {
  HANDLE job = as_handle(handle);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto it = g_by_anchor.begin(); it != g_by_anchor.end();) {
      if (it->second == job) it = g_by_anchor.erase(it);
      else ++it;
    }
  }
  if (!CloseHandle(job)) return -win::errno_from(GetLastError());
  return 0;
}

int list_tree(int64_t anchor, int64_t /*group*/, const std::vector<FileId>& /*watched*/, std::vector<Member>& out,
              bool /*commands: always read*/) {
  out.clear();
  HANDLE job = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_by_anchor.find(anchor);
    if (it != g_by_anchor.end()) job = it->second;
  }
  if (!job) return 0;  // no job known for this anchor (already released)
  return win::list_job(job, out);
}

int signal_member(int64_t, int64_t, const Member&, int, bool) { return -ENOSYS; }
int signal_member_then_cont(int64_t, int64_t, const Member&, int, bool) { return -ENOSYS; }

bool same_process_alive(int64_t pid, uint64_t start_time) {
  HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, static_cast<DWORD>(pid));
  if (!h) return false;
  bool alive = WaitForSingleObject(h, 0) == WAIT_TIMEOUT;
  FILETIME created, exited, kernel, user;
  if (alive && start_time != 0 && GetProcessTimes(h, &created, &exited, &kernel, &user)) {
    alive = ((static_cast<uint64_t>(created.dwHighDateTime) << 32) | created.dwLowDateTime) == start_time;
  }
  CloseHandle(h);
  return alive;
}

uint64_t start_time_of(int64_t pid) {
  HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, static_cast<DWORD>(pid));
  if (!h) return 0;
  uint64_t stamp = 0;
  FILETIME created, exited, kernel, user;
  // An exited process whose handle someone still holds is gone all the same.
  if (WaitForSingleObject(h, 0) == WAIT_TIMEOUT && GetProcessTimes(h, &created, &exited, &kernel, &user)) {
    stamp = (static_cast<uint64_t>(created.dwHighDateTime) << 32) | created.dwLowDateTime;
  }
  CloseHandle(h);
  return stamp;
}

int make_private_dir(const std::string& path) {
  std::vector<unsigned char> sid;
  if (!win::own_sid(sid)) return -win::errno_from(GetLastError() ? GetLastError() : ERROR_ACCESS_DENIED);
  // One ACE, the user's, inherited by what is made inside; protected, so
  // nothing of the parent's DACL (Administrators, SYSTEM) comes in.
  DWORD acl_size = sizeof(ACL) + sizeof(ACCESS_ALLOWED_ACE) + static_cast<DWORD>(sid.size());
  std::vector<unsigned char> acl_buf(acl_size);
  PACL acl = reinterpret_cast<PACL>(acl_buf.data());
  SECURITY_DESCRIPTOR sd;
  if (!InitializeAcl(acl, acl_size, ACL_REVISION) ||
      !AddAccessAllowedAceEx(acl, ACL_REVISION, OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE, FILE_ALL_ACCESS, sid.data()) ||
      !InitializeSecurityDescriptor(&sd, SECURITY_DESCRIPTOR_REVISION) || !SetSecurityDescriptorDacl(&sd, TRUE, acl, FALSE) ||
      !SetSecurityDescriptorControl(&sd, SE_DACL_PROTECTED, SE_DACL_PROTECTED)) {
    return -win::errno_from(GetLastError());
  }
  SECURITY_ATTRIBUTES sa = {sizeof sa, &sd, FALSE};
  if (!CreateDirectoryW(win::wide(path).c_str(), &sa)) return -win::errno_from(GetLastError());
  return 0;
}

namespace {

// "self", "system", "administrators", "creator-owner", or the SID's string form.
std::string sid_name(PSID sid, const std::vector<unsigned char>& self) {
  if (!sid || !IsValidSid(sid)) return "invalid";
  if (!self.empty() && EqualSid(sid, const_cast<unsigned char*>(self.data()))) return "self";
  static const struct {
    WELL_KNOWN_SID_TYPE type;
    const char* name;
  } known[] = {{WinLocalSystemSid, "system"}, {WinBuiltinAdministratorsSid, "administrators"}, {WinCreatorOwnerSid, "creator-owner"}};
  for (const auto& k : known) {
    unsigned char buf[SECURITY_MAX_SID_SIZE];
    DWORD n = sizeof buf;
    if (CreateWellKnownSid(k.type, nullptr, buf, &n) && EqualSid(sid, buf)) return k.name;
  }
  LPSTR text = nullptr;
  if (!ConvertSidToStringSidA(sid, &text)) return "unknown";
  std::string out(text);
  LocalFree(text);
  return out;
}

}  // namespace

int read_dir_security(const std::string& path, DirSecurity& out) {
  out = DirSecurity();
  std::vector<unsigned char> self;
  win::own_sid(self);  // (empty: nothing is named "self")
  HANDLE h = CreateFileW(win::wide(path).c_str(), READ_CONTROL | FILE_READ_ATTRIBUTES,
                         FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                         FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT, nullptr);
  if (h == INVALID_HANDLE_VALUE) return -win::errno_from(GetLastError());
  BY_HANDLE_FILE_INFORMATION info;
  if (!GetFileInformationByHandle(h, &info)) {
    int err = win::errno_from(GetLastError());
    CloseHandle(h);
    return -err;
  }
  out.directory = (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0;
  out.reparse = (info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) != 0;
  PSID owner = nullptr;
  PACL dacl = nullptr;
  PSECURITY_DESCRIPTOR sd = nullptr;
  DWORD rc = GetSecurityInfo(h, SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION, &owner,
                             nullptr, &dacl, nullptr, &sd);
  CloseHandle(h);
  if (rc != ERROR_SUCCESS) return -win::errno_from(rc);
  out.owner = sid_name(owner, self);
  out.dacl_present = dacl != nullptr;
  if (dacl) {
    for (DWORD i = 0; i < dacl->AceCount; i++) {
      void* ace = nullptr;
      if (!GetAce(dacl, i, &ace)) continue;
      auto* header = static_cast<ACE_HEADER*>(ace);
      DirAce entry;
      // Only a deny ACE grants nothing; every other type (object, callback)
      // is counted as an allow.
      entry.allow = header->AceType != ACCESS_DENIED_ACE_TYPE && header->AceType != ACCESS_DENIED_OBJECT_ACE_TYPE &&
                    header->AceType != ACCESS_DENIED_CALLBACK_ACE_TYPE &&
                    header->AceType != ACCESS_DENIED_CALLBACK_OBJECT_ACE_TYPE;
      // ACCESS_ALLOWED_ACE and ACCESS_DENIED_ACE share their layout; the
      // object and callback types put the SID elsewhere: named unknown.
      bool plain = header->AceType == ACCESS_ALLOWED_ACE_TYPE || header->AceType == ACCESS_DENIED_ACE_TYPE;
      entry.sid = plain ? sid_name(&static_cast<ACCESS_ALLOWED_ACE*>(ace)->SidStart, self) : "unknown";
      out.aces.push_back(entry);
    }
  }
  LocalFree(sd);
  return 0;
}

int open_pipe_client(const std::string& name, int& fd_out, uint32_t& server_pid_out) {
  fd_out = -1;
  server_pid_out = 0;
  HANDLE h = CreateFileW(win::wide(name).c_str(), GENERIC_READ | GENERIC_WRITE, 0, nullptr, OPEN_EXISTING,
                         FILE_FLAG_OVERLAPPED | SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    DWORD err = GetLastError();
    return err == ERROR_PIPE_BUSY ? -EBUSY : -win::errno_from(err);
  }
  ULONG pid = 0;
  if (!GetNamedPipeServerProcessId(h, &pid)) {
    int err = win::errno_from(GetLastError());
    CloseHandle(h);
    return -err;
  }
  int fd = uv_open_osfhandle(h);
  if (fd < 0) {
    CloseHandle(h);
    return -EMFILE;
  }
  fd_out = fd;
  server_pid_out = pid;
  return 0;
}

int own_job(bool& in_job, bool& limits_read, uint32_t& limit_flags) {
  in_job = limits_read = false;
  limit_flags = 0;
  BOOL in = FALSE;
  if (!IsProcessInJob(GetCurrentProcess(), nullptr, &in)) return -win::errno_from(GetLastError());
  in_job = in != FALSE;
  if (!in_job) return 0;
  // NULL: the job of the calling process (the immediate one, when nested).
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION info;
  ZeroMemory(&info, sizeof info);
  if (QueryInformationJobObject(nullptr, JobObjectExtendedLimitInformation, &info, sizeof info, nullptr)) {
    limits_read = true;
    limit_flags = info.BasicLimitInformation.LimitFlags;
  }
  return 0;
}

int count_open_fds() {
  DWORD count = 0;
  if (!GetProcessHandleCount(GetCurrentProcess(), &count)) return -win::errno_from(GetLastError());
  return static_cast<int>(count);
}

namespace {

// One pipe for a command's stdio, as libuv makes it for child_process's
// 'pipe': the host's end the server of a named pipe of one instance
// (overlapped, FILE_FLAG_FIRST_PIPE_INSTANCE, no remote client), the
// command's end a synchronous client opened on it at once; the command
// reads (`child_reads`: stdin) or writes (stdout, stderr) only.
bool stdio_pipe(bool child_reads, HANDLE& host_end, HANDLE& child_end) {
  static LONG counter = 0;
  host_end = child_end = INVALID_HANDLE_VALUE;
  LARGE_INTEGER tick;
  QueryPerformanceCounter(&tick);
  wchar_t name[96];
  _snwprintf(name, 96, L"\\\\.\\pipe\\cordon-warm-%lu-%ld-%llx", GetCurrentProcessId(), InterlockedIncrement(&counter),
             static_cast<unsigned long long>(tick.QuadPart));
  name[95] = L'\0';
  SECURITY_ATTRIBUTES sa = {sizeof sa, nullptr, FALSE};
  host_end = CreateNamedPipeW(name,
                              (child_reads ? PIPE_ACCESS_OUTBOUND : PIPE_ACCESS_INBOUND) | FILE_FLAG_OVERLAPPED |
                                  FILE_FLAG_FIRST_PIPE_INSTANCE,
                              PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS, 1, 65536,
                              65536, 0, &sa);
  if (host_end == INVALID_HANDLE_VALUE) return false;
  child_end = CreateFileW(name, child_reads ? (GENERIC_READ | FILE_WRITE_ATTRIBUTES) : (GENERIC_WRITE | FILE_READ_ATTRIBUTES),
                          0, &sa, OPEN_EXISTING, 0, nullptr);
  // (Connected by the client's open: ConnectNamedPipe says so, or the pipe
  // was someone else's first.)
  if (child_end == INVALID_HANDLE_VALUE || (!ConnectNamedPipe(host_end, nullptr) && GetLastError() != ERROR_PIPE_CONNECTED)) {
    DWORD err = GetLastError();
    if (child_end != INVALID_HANDLE_VALUE) CloseHandle(child_end);
    CloseHandle(host_end);
    host_end = child_end = INVALID_HANDLE_VALUE;
    SetLastError(err);
    return false;
  }
  return true;
}

}  // namespace

int warm_stdio(int64_t anchor_pid, const int modes[3], uint64_t remote_out[3], int fds_out[3]) {
  HANDLE host_end[3] = {INVALID_HANDLE_VALUE, INVALID_HANDLE_VALUE, INVALID_HANDLE_VALUE};
  HANDLE remote[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; i++) {
    remote_out[i] = 0;
    fds_out[i] = -1;
  }
  // The anchor is the host's unexited child (libuv holds its handle): its pid is pinned.
  HANDLE anchor = OpenProcess(PROCESS_DUP_HANDLE, FALSE, static_cast<DWORD>(anchor_pid));
  if (!anchor) return -win::errno_from(GetLastError());
  DWORD err = 0;
  for (int i = 0; i < 3 && !err; i++) {
    HANDLE child = INVALID_HANDLE_VALUE;
    bool own = true;  // `child` is ours to close once duplicated
    if (modes[i] == kWarmPipe) {
      if (!stdio_pipe(i == 0, host_end[i], child)) err = GetLastError() ? GetLastError() : ERROR_PIPE_BUSY;
    } else if (modes[i] == kWarmIgnore) {
      // As libuv gives a command 'ignore': the NUL device, stdin readable, stdout and stderr writable.
      SECURITY_ATTRIBUTES sa = {sizeof sa, nullptr, FALSE};
      child = CreateFileW(L"NUL", i == 0 ? FILE_GENERIC_READ : (FILE_GENERIC_WRITE | FILE_READ_ATTRIBUTES),
                          FILE_SHARE_READ | FILE_SHARE_WRITE, &sa, OPEN_EXISTING, 0, nullptr);
      if (child == INVALID_HANDLE_VALUE) err = GetLastError();
    } else {
      // 'inherit': the host's own descriptor i (none if it has none, as libuv does for a closed 0-2).
      child = uv_get_osfhandle(i);
      own = false;
    }
    if (err || child == INVALID_HANDLE_VALUE || child == nullptr) continue;
    if (!DuplicateHandle(GetCurrentProcess(), child, anchor, &remote[i], 0, TRUE, DUPLICATE_SAME_ACCESS)) {
      err = GetLastError();
      remote[i] = nullptr;
    }
    if (own) CloseHandle(child);
  }
  if (!err) {
    for (int i = 0; i < 3 && !err; i++) {
      if (host_end[i] == INVALID_HANDLE_VALUE) continue;
      fds_out[i] = uv_open_osfhandle(host_end[i]);
      if (fds_out[i] < 0) err = ERROR_TOO_MANY_OPEN_FILES;
      else host_end[i] = INVALID_HANDLE_VALUE;  // (the descriptor's now)
    }
  }
  if (err) {
    // Nothing was sent: what went into the anchor is closed there (taken
    // over and closed: Wine refuses DUPLICATE_CLOSE_SOURCE with no target).
    for (HANDLE r : remote) {
      HANDLE copy = nullptr;
      if (r && DuplicateHandle(anchor, r, GetCurrentProcess(), &copy, 0, FALSE, DUPLICATE_SAME_ACCESS | DUPLICATE_CLOSE_SOURCE)) {
        CloseHandle(copy);
      }
    }
    for (HANDLE h : host_end) {
      if (h != INVALID_HANDLE_VALUE) CloseHandle(h);
    }
    CloseHandle(anchor);
    // (The descriptors made so far are closed by the caller: fds_out.)
    return -win::errno_from(err);
  }
  CloseHandle(anchor);
  for (int i = 0; i < 3; i++) remote_out[i] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(remote[i]));
  return 0;
}

int host_identity(std::string& out) {
  if (!win::token_identity(GetCurrentProcess(), out)) return -win::errno_from(GetLastError());
  out += "p" + std::to_string(GetPriorityClass(GetCurrentProcess()));
  // As hex: what the pool keys on is text.
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(out.size() * 2);
  for (unsigned char c : out) {
    hex.push_back(digits[c >> 4]);
    hex.push_back(digits[c & 15]);
  }
  out.swap(hex);
  return 0;
}

}  // namespace cordon
