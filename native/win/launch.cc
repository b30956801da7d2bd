// Starting the command: launch.h says what it guarantees.
#include "launch.h"

#include <io.h>
#include <tlhelp32.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#ifndef PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE
// (ProcThreadAttributeValue(22, FALSE, TRUE, FALSE): headers older than Windows 10 1809 lack it.)
#define PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE 0x00020016
#endif

namespace cordon {
namespace anchor {

namespace {

using protocol::trace;

// One argument quoted for CommandLineToArgvW / the MSVC runtime, exactly as
// libuv (and so Node's child_process) quotes it (quote_cmd_arg).
void quote_arg(const std::wstring& arg, std::wstring& out) {
  if (arg.empty()) {
    out += L"\"\"";
    return;
  }
  if (arg.find_first_of(L" \t\"") == std::wstring::npos) {
    out += arg;
    return;
  }
  if (arg.find_first_of(L"\"\\") == std::wstring::npos) {
    out += L'"';
    out += arg;
    out += L'"';
    return;
  }
  out += L'"';
  size_t backslashes = 0;
  for (wchar_t c : arg) {
    if (c == L'\\') {
      backslashes++;
      continue;
    }
    if (c == L'"') {
      out.append(backslashes * 2 + 1, L'\\');
    } else {
      out.append(backslashes, L'\\');
    }
    backslashes = 0;
    out += c;
  }
  out.append(backslashes * 2, L'\\');
  out += L'"';
}

bool ends_with_ci(const std::wstring& s, const wchar_t* suffix) {
  size_t n = wcslen(suffix);
  return s.size() >= n && _wcsicmp(s.c_str() + s.size() - n, suffix) == 0;
}

// Win32's reading of a file name: trailing dots and spaces and a ::$DATA
// suffix dropped from the last name.
std::wstring win32_name(const std::wstring& path) {
  std::wstring p = path;
  for (;;) {
    size_t before = p.size();
    while (!p.empty() && (p.back() == L'.' || p.back() == L' ')) p.pop_back();
    if (ends_with_ci(p, L"::$DATA")) p.resize(p.size() - 7);
    if (p.size() == before) return p;
  }
}

bool is_batch(const std::wstring& path) {
  std::wstring n = win32_name(path);
  return ends_with_ci(n, L".cmd") || ends_with_ci(n, L".bat");
}

// A fully qualified path (C:\..., \\server\...): nothing is searched for.
bool fully_qualified(const std::wstring& p) {
  if (p.size() >= 3 && iswalpha(p[0]) && p[1] == L':' && (p[2] == L'\\' || p[2] == L'/')) return true;
  return p.size() >= 3 && (p[0] == L'\\' || p[0] == L'/') && (p[1] == L'\\' || p[1] == L'/');
}

bool batch_bare(const std::wstring& a) {
  if (a.empty()) return false;
  for (wchar_t c : a) {
    bool ok = (c >= L'a' && c <= L'z') || (c >= L'A' && c <= L'Z') || (c >= L'0' && c <= L'9') ||
              (c != 0 && wcschr(L"#$*+-./:?@\\_", c) != nullptr);
    if (!ok) return false;
  }
  return true;
}

// The command line of a .cmd/.bat: cmd.exe /d /e:ON /v:OFF /s /c ""path" args".
// Each argument bare (batch_bare) or in double quotes; false for an argument
// no quoting keeps literal through cmd.exe and the batch file's own re-parse
// of %* (lib/resolve.ts checkBatchArgs refuses these before the spawn).
bool batch_command_line(const std::wstring& path, const std::vector<std::wstring>& args, std::wstring& line) {
  if (path.find_first_of(L"%\"") != std::wstring::npos) return false;
  line = L"/d /e:ON /v:OFF /s /c \"\"";
  line += path;
  line += L'"';
  for (size_t i = 1; i < args.size(); i++) {
    const std::wstring& a = args[i];
    if (a.find_first_of(L"\"%!\r\n") != std::wstring::npos) return false;
    line += L' ';
    if (batch_bare(a)) {
      line += a;
      continue;
    }
    if (!a.empty() && a.back() == L'\\') return false;
    line += L'"';
    line += a;
    line += L'"';
  }
  line += L'"';
  return true;
}

// The system's cmd.exe, never one named by the command's environment (ComSpec).
std::wstring system_cmd() {
  wchar_t buf[MAX_PATH];
  UINT n = GetSystemDirectoryW(buf, MAX_PATH);
  if (n == 0 || n >= MAX_PATH) return L"C:\\Windows\\System32\\cmd.exe";
  return std::wstring(buf, n) + L"\\cmd.exe";
}

// What the command runs: `app` (lpApplicationName) and its command line
// `line`. false: refused (traced; EXECFAIL EINVAL).
bool command_line(const Options& o, std::wstring& app, std::wstring& line) {
  app = o.path;
  // Only a resolved, canonical, absolute name is run (lib/resolve.ts gives
  // one): Windows' search order and name rewriting never choose the file.
  if (!fully_qualified(app) || win32_name(app) != app) {
    trace("refused command path (not absolute or not canonical)");
    return false;
  }
  if (o.cmd_shell) {
    // Shell mode (--cmd-shell): ARGV0 and one line, which the system's
    // cmd.exe runs as given: /s strips the outer quotes, so the line
    // keeps its own. /v:OFF: a `!` is literal whatever the registry's
    // DelayedExpansion says (as %...% is cmd's own, !...! is not asked
    // for). CR and LF would end it early: refused (the host refuses them
    // first).
    if (o.argv.size() != 2 || o.argv[1].find_first_of(L"\r\n") != std::wstring::npos) {
      trace("refused shell line");
      return false;
    }
    app = system_cmd();
    quote_arg(app, line);
    line += L" /d /v:OFF /s /c \"";
    line += o.argv[1];
    line += L'"';
  } else if (is_batch(app)) {
    std::wstring shell = system_cmd();
    std::wstring rest;
    if (!batch_command_line(o.path, o.argv, rest)) {
      trace("refused batch argument");
      return false;
    }
    quote_arg(shell, line);
    line += L' ';
    line += rest;
    app = shell;
  } else {
    for (size_t i = 0; i < o.argv.size(); i++) {
      if (i) line += L' ';
      quote_arg(o.argv[i], line);
    }
  }
  return true;
}

// Wine's console host holds what the anchor inherited. The anchor is
// started with CREATE_NO_WINDOW (Node's windowsHide), so it allocates a
// console as it starts; Wine 8 serves it with a conhost.exe that it creates
// as the anchor's child with bInheritHandles and no handle list, before
// main() runs: that conhost holds a copy of each handle the anchor got from
// the host (the command's stdio pipes, the control channel) at the same
// value, for as long as any process is attached to the console. It then
// holds the command's output (no RELEASED, waitDelayExceeded, where Node's
// child_process sees EOF) and the host's end of the channel. Measured under
// Wine 8 (test/win/README.md), not on Windows, whose console host is started
// by the system. A copy is closed only where the handle at that value in a
// conhost.exe child of ours is the very object we hold; elsewhere nothing
// matches and nothing is done.
void close_console_host_copies(const HANDLE channel[2]) {
  typedef BOOL(WINAPI * CompareFn)(HANDLE, HANDLE);
  auto same = reinterpret_cast<CompareFn>(
      reinterpret_cast<void*>(GetProcAddress(GetModuleHandleW(L"kernelbase.dll"), "CompareObjectHandles")));
  if (!same) return;
  std::vector<HANDLE> ours = {GetStdHandle(STD_INPUT_HANDLE), GetStdHandle(STD_OUTPUT_HANDLE),
                              GetStdHandle(STD_ERROR_HANDLE), channel[0], channel[1]};
  FILETIME my_start, t1, t2, t3;
  if (!GetProcessTimes(GetCurrentProcess(), &my_start, &t1, &t2, &t3)) return;
  HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  if (snap == INVALID_HANDLE_VALUE) return;
  PROCESSENTRY32W pe;
  pe.dwSize = sizeof pe;
  for (BOOL more = Process32FirstW(snap, &pe); more; more = Process32NextW(snap, &pe)) {
    if (pe.th32ParentProcessID != GetCurrentProcessId() || _wcsicmp(pe.szExeFile, L"conhost.exe") != 0) continue;
    HANDLE host = OpenProcess(PROCESS_DUP_HANDLE | PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pe.th32ProcessID);
    if (!host) continue;
    FILETIME start;
    // Our child, not an older process on a reused pid: started after us.
    if (GetProcessTimes(host, &start, &t1, &t2, &t3) && CompareFileTime(&start, &my_start) >= 0) {
      for (HANDLE h : ours) {
        if (!h || h == INVALID_HANDLE_VALUE) continue;
        HANDLE copy = nullptr;
        if (!DuplicateHandle(host, h, GetCurrentProcess(), &copy, 0, FALSE, DUPLICATE_SAME_ACCESS)) continue;
        bool match = same(copy, h);
        CloseHandle(copy);
        // (Closed by taking it over: Wine refuses DUPLICATE_CLOSE_SOURCE with no target.)
        if (match && DuplicateHandle(host, h, GetCurrentProcess(), &copy, 0, FALSE,
                                     DUPLICATE_SAME_ACCESS | DUPLICATE_CLOSE_SOURCE)) {
          CloseHandle(copy);
          trace("closed the console host's (pid %lu) copy of handle %p", pe.th32ProcessID, h);
        }
      }
    }
    CloseHandle(host);
  }
  CloseHandle(snap);
}

// The root's exit is posted to the port by a waiter on its handle; the
// handle itself stays open until the anchor exits, pinning the pid (and so
// the console process group id) against reuse.
struct RootWaiter {
  HANDLE root;
  HANDLE port;
};

DWORD WINAPI root_waiter(LPVOID arg) {
  auto* w = static_cast<RootWaiter*>(arg);
  WaitForSingleObject(w->root, INFINITE);
  PostQueuedCompletionStatus(w->port, 0, kKeyRoot, nullptr);
  return 0;
}

}  // namespace

std::string launch(const Options& opts, bool leased, Job& job, HANDLE port, const HANDLE channel[2], Root& root,
                   PseudoConsole* pty) {
  close_console_host_copies(channel);
  std::wstring app;
  std::wstring line;
  if (!command_line(opts, app, line)) return protocol::exec_fail(EINVAL);

  STARTUPINFOEXW si;
  ZeroMemory(&si, sizeof si);
  si.StartupInfo.cb = sizeof si;
  si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
  // A terminal (pty.h): the command's standard handles are the pseudo
  // console's. STARTF_USESTDHANDLES with none given, and nothing inherited:
  // without it Windows (and Wine) give the command the anchor's own standard
  // handles (the host's pipes, redirected), and its output would bypass the
  // console (microsoft/terminal#11276); with none, Windows gives it the
  // console's. (Wine 8 gives it none: measured, pty.h.)
  const bool terminal = pty && pty->active();
  // The show state is the caller's (windowsHide), never the anchor's own:
  // the host always starts the anchor hidden, and a command that inherited
  // that would start every window hidden. Without --hide-window the command
  // gets no STARTF_USESHOWWINDOW: it shows its windows as it would itself.
  if (opts.hide_window) {
    si.StartupInfo.dwFlags |= STARTF_USESHOWWINDOW;
    si.StartupInfo.wShowWindow = SW_HIDE;
  }
  HANDLE std_handles[3] = {GetStdHandle(STD_INPUT_HANDLE), GetStdHandle(STD_OUTPUT_HANDLE),
                           GetStdHandle(STD_ERROR_HANDLE)};
  if (terminal) std_handles[0] = std_handles[1] = std_handles[2] = nullptr;
  si.StartupInfo.hStdInput = std_handles[0];
  si.StartupInfo.hStdOutput = std_handles[1];
  si.StartupInfo.hStdError = std_handles[2];

  // The command inherits exactly its inheritable stdio (PROC_THREAD_ATTRIBUTE_HANDLE_LIST)
  // and is born in the job (PROC_THREAD_ATTRIBUTE_JOB_LIST), both in the
  // attribute list attached to `si`. Without the handle list the command
  // would inherit every inheritable handle the anchor holds, which includes
  // whatever was inheritable in the host when it started the anchor (another
  // spawn's pipes, another addon's files): a leftover then holds them open.
  std::vector<HANDLE> inherit;
  for (HANDLE h : std_handles) {
    DWORD flags;
    if (h && h != INVALID_HANDLE_VALUE && GetHandleInformation(h, &flags) && (flags & HANDLE_FLAG_INHERIT)) {
      bool dup = false;
      for (HANDLE o : inherit) dup = dup || o == h;
      if (!dup) inherit.push_back(h);
    }
  }
  std::vector<unsigned char> attr_buf;
  LPPROC_THREAD_ATTRIBUTE_LIST attrs = nullptr;
  HANDLE job_list[1] = {job.handle()};
  // The attribute list for one attempt, attached to `si`; 0, or the error
  // (and which attribute it was: `failed`) that kept it from being built.
  const char* failed = "";
  void* console = terminal ? pty->handle() : nullptr;
  auto build_attrs = [&](bool with_job, bool with_handles) -> DWORD {
    si.lpAttributeList = nullptr;
    DWORD count = (with_job ? 1 : 0) + (with_handles ? 1 : 0) + (terminal ? 1 : 0);
    if (count == 0) return 0;
    SIZE_T size = 0;
    failed = "attribute list";
    InitializeProcThreadAttributeList(nullptr, count, 0, &size);
    if (size == 0) return GetLastError() ? GetLastError() : ERROR_INVALID_PARAMETER;
    attr_buf.assign(size, 0);
    attrs = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(attr_buf.data());
    if (!InitializeProcThreadAttributeList(attrs, count, 0, &size)) return GetLastError();
    DWORD err = 0;
    if (with_job && !UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_JOB_LIST, job_list, sizeof job_list,
                                               nullptr, nullptr)) {
      err = GetLastError();
      failed = "job list";
    } else if (with_handles && !UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, inherit.data(),
                                                          inherit.size() * sizeof(HANDLE), nullptr, nullptr)) {
      err = GetLastError();
      failed = "handle list";
    } else if (terminal && !UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, console,
                                                      sizeof console, nullptr, nullptr)) {
      err = GetLastError();
      failed = "pseudo console";
    }
    if (err) {
      DeleteProcThreadAttributeList(attrs);
      attrs = nullptr;
      return err;
    }
    si.lpAttributeList = attrs;
    return 0;
  };

  // The trace file is the anchor's own: kept uninheritable (the handle list
  // leaves it out in any case).
  if (FILE* tf = protocol::trace_file()) SetHandleInformation(reinterpret_cast<HANDLE>(_get_osfhandle(_fileno(tf))), HANDLE_FLAG_INHERIT, 0);

  DWORD flags = CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT;
  // The root leads its own console process group (CTRL_BREAK goes there),
  // except on a terminal: a new group ignores Ctrl-C, which the terminal's
  // 0x03 must deliver (the pseudo console's processes are the tree's alone).
  if (!terminal) flags |= CREATE_NEW_PROCESS_GROUP;
  // Leased: the anchor runs detached, with no console to share; a console
  // program gets one of its own, without a window.
  if (leased && !terminal) flags |= CREATE_NO_WINDOW;
  PROCESS_INFORMATION pi;
  ZeroMemory(&pi, sizeof pi);
  BOOL ok = FALSE;
  DWORD err = 0;
  const bool with_handles = !inherit.empty();
  // Attempts: with the job list, then without it. A job list the OS rejects
  // (or a job that refuses the new process, ERROR_NOT_ENOUGH_QUOTA) costs
  // nothing of containment: the command is created suspended either way and
  // assigned below, where strict and best-effort decide. The handle list is
  // never dropped: where it cannot be built or is rejected, nothing runs
  // (NOCONTAIN <errno> handle-list).
  for (bool with_job : {job.handle() != nullptr && !job.test_refuses_processes(), false}) {
    if (DWORD aerr = build_attrs(with_job, with_handles)) {
      trace("cannot build the %s: error %lu", failed, aerr);
      if (with_job) continue;
      if (terminal && strcmp(failed, "pseudo console") == 0) return protocol::no_contain(win::errno_from(aerr), "pty");
      return protocol::no_contain(win::errno_from(aerr), "handle-list");
    }
    std::vector<wchar_t> cmd(line.begin(), line.end());
    cmd.push_back(L'\0');
    // The command's working directory is given to it here: the anchor itself
    // runs elsewhere (the host starts it in its own directory), so that it
    // never holds the command's directory open (Windows refuses to remove a
    // directory that is a process's working directory).
    ok = CreateProcessW(app.c_str(), cmd.data(), nullptr, nullptr, with_handles ? TRUE : FALSE,
                        flags | (si.lpAttributeList ? EXTENDED_STARTUPINFO_PRESENT : 0), nullptr,
                        opts.cwd.empty() ? nullptr : opts.cwd.c_str(), &si.StartupInfo, &pi);
    err = ok ? 0 : GetLastError();
    if (attrs) DeleteProcThreadAttributeList(attrs);
    attrs = nullptr;
    si.lpAttributeList = nullptr;
    if (ok) {
      trace("created suspended with job list %d, handle list %d", with_job ? 1 : 0, with_handles ? 1 : 0);
      break;
    }
    trace("CreateProcessW (job list %d, handle list %d): error %lu", with_job ? 1 : 0, with_handles ? 1 : 0, err);
    const bool rejected = err == ERROR_INVALID_PARAMETER || err == ERROR_NOT_SUPPORTED;
    // Only the job list is worth another attempt without it.
    if (with_job && (rejected || err == ERROR_ACCESS_DENIED || err == ERROR_NOT_ENOUGH_QUOTA)) continue;
    // The handle list itself rejected (an attribute the OS does not take,
    // a handle it refuses): never run without it.
    if (with_handles && rejected) return protocol::no_contain(win::errno_from(err), "handle-list");
    break;
  }
  if (!ok) {
    // A working directory that cannot be entered (gone, not a directory,
    // no access) is NOCWD, as on POSIX: the command itself may be fine.
    if (!opts.cwd.empty() && (err == ERROR_DIRECTORY || err == ERROR_PATH_NOT_FOUND || err == ERROR_ACCESS_DENIED)) {
      DWORD attrs = GetFileAttributesW(opts.cwd.c_str());
      if (attrs == INVALID_FILE_ATTRIBUTES || !(attrs & FILE_ATTRIBUTE_DIRECTORY)) {
        return protocol::no_cwd(win::errno_from(err == ERROR_DIRECTORY ? ERROR_PATH_NOT_FOUND : err));
      }
    }
    return protocol::exec_fail(win::errno_from(err));
  }

  DWORD aerr = job.assign(pi.hProcess);
  // A limit can be what refuses the assignment (a memory limit below what
  // the new process has committed): best-effort drops the limits before it
  // drops containment, and the result says no limit was applied.
  if (aerr && opts.best_effort && job.drop_limits()) aerr = job.assign(pi.hProcess);
  if (aerr) {
    if (!opts.best_effort) {
      // Nothing of the command ran: it never left CREATE_SUSPENDED.
      TerminateProcess(pi.hProcess, kKilledCode);
      WaitForSingleObject(pi.hProcess, 5000);
      CloseHandle(pi.hThread);
      CloseHandle(pi.hProcess);
      return protocol::no_contain(win::errno_from(aerr), "job-object");
    }
    job.close();
  }
  root.process = pi.hProcess;
  root.pid = pi.dwProcessId;
  if (ResumeThread(pi.hThread) == static_cast<DWORD>(-1)) {
    DWORD rerr = GetLastError();
    CloseHandle(pi.hThread);
    if (job.held()) job.terminate();
    TerminateProcess(root.process, kKilledCode);
    return protocol::exec_fail(win::errno_from(rerr));
  }
  CloseHandle(pi.hThread);
  trace("root %lu started (%s)", root.pid, job.tier());
  HANDLE waiter = CreateThread(nullptr, 64 * 1024, root_waiter, new RootWaiter{root.process, port}, 0, nullptr);
  if (waiter) CloseHandle(waiter);
  return std::string();
}

void release_stdio() {
  HANDLE seen[3] = {nullptr, nullptr, nullptr};
  const DWORD ids[3] = {STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE};
  for (int i = 0; i < 3; i++) {
    HANDLE h = GetStdHandle(ids[i]);
    SetStdHandle(ids[i], nullptr);
    if (!h || h == INVALID_HANDLE_VALUE) continue;
    bool dup = false;
    for (int j = 0; j < i; j++) dup = dup || seen[j] == h;
    seen[i] = h;
    if (!dup) CloseHandle(h);
  }
}

}  // namespace anchor
}  // namespace cordon
