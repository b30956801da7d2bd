// The anchor's terminal on Windows: pty.h says what it guarantees.
#include "pty.h"

#include <tlhelp32.h>

#include <vector>

namespace cordon {
namespace anchor {

namespace {

using protocol::trace;

// ConPTY's three functions, as kernel32 exports them (Windows 10 1809 and
// later): looked up at run time, so the anchor starts where they are absent.
// (The handle is an opaque pointer: HPCON.)
typedef HRESULT(WINAPI* CreateFn)(COORD size, HANDLE input, HANDLE output, DWORD flags, void** console);
typedef HRESULT(WINAPI* ResizeFn)(void* console, COORD size);
typedef void(WINAPI* CloseFn)(void* console);

struct Api {
  CreateFn create = nullptr;
  ResizeFn resize = nullptr;
  CloseFn close = nullptr;
};

const Api& api() {
  static Api a = [] {
    Api out;
    HMODULE k = GetModuleHandleW(L"kernel32.dll");
    if (!k) return out;
    out.create = reinterpret_cast<CreateFn>(reinterpret_cast<void*>(GetProcAddress(k, "CreatePseudoConsole")));
    out.resize = reinterpret_cast<ResizeFn>(reinterpret_cast<void*>(GetProcAddress(k, "ResizePseudoConsole")));
    out.close = reinterpret_cast<CloseFn>(reinterpret_cast<void*>(GetProcAddress(k, "ClosePseudoConsole")));
    if (!out.create || !out.resize || !out.close) out = Api();
    return out;
  }();
  return a;
}

COORD size_of(int cols, int rows) {
  COORD c;
  c.X = static_cast<SHORT>(cols > 32767 ? 32767 : cols);
  c.Y = static_cast<SHORT>(rows > 32767 ? 32767 : rows);
  return c;
}

// The conhost.exe children of this process now.
std::vector<DWORD> console_hosts() {
  std::vector<DWORD> out;
  HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  if (snap == INVALID_HANDLE_VALUE) return out;
  PROCESSENTRY32W pe;
  pe.dwSize = sizeof pe;
  for (BOOL more = Process32FirstW(snap, &pe); more; more = Process32NextW(snap, &pe)) {
    if (pe.th32ParentProcessID == GetCurrentProcessId() && _wcsicmp(pe.szExeFile, L"conhost.exe") == 0) {
      out.push_back(pe.th32ProcessID);
    }
  }
  CloseHandle(snap);
  return out;
}

}  // namespace

bool PseudoConsole::available() { return api().create != nullptr; }

DWORD PseudoConsole::contain_host(Job& job, const FILETIME& since, const std::vector<DWORD>& before) {
  for (DWORD pid : console_hosts()) {
    bool old = false;
    for (DWORD b : before) old = old || b == pid;
    if (old) continue;
    HANDLE h = OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE | PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE,
                           FALSE, pid);
    if (!h) continue;
    FILETIME start, t1, t2, t3;
    // Ours, not an older process on a reused pid: started as we made the console.
    if (!GetProcessTimes(h, &start, &t1, &t2, &t3) || CompareFileTime(&start, &since) < 0) {
      CloseHandle(h);
      continue;
    }
    host_process_ = h;
    host_pid_ = pid;
    break;
  }
  if (!host_process_) {
    trace("pty: the console host was not found among our children");
    return ERROR_NOT_FOUND;
  }
  if (!job.held()) return 0;
  DWORD err = job.assign(host_process_);
  trace("pty: console host %lu %s the tree's job", static_cast<unsigned long>(host_pid_), err ? "not in" : "in");
  return err;
}

DWORD PseudoConsole::open(int cols, int rows, Job& job) {
  const Api& a = api();
  if (!a.create) return ERROR_CALL_NOT_IMPLEMENTED;
  // The host's pipes are the relay's, never a child's: the console host
  // (started by CreatePseudoConsole) and the command inherit none of them.
  host_in_ = GetStdHandle(STD_INPUT_HANDLE);
  host_out_ = GetStdHandle(STD_OUTPUT_HANDLE);
  for (HANDLE h : {host_in_, host_out_, GetStdHandle(STD_ERROR_HANDLE)}) {
    if (h && h != INVALID_HANDLE_VALUE) SetHandleInformation(h, HANDLE_FLAG_INHERIT, 0);
  }
  HANDLE in_read = nullptr, out_write = nullptr;
  if (!CreatePipe(&in_read, &console_in_, nullptr, 0)) return GetLastError();
  if (!CreatePipe(&console_out_, &out_write, nullptr, 0)) {
    DWORD err = GetLastError();
    CloseHandle(in_read);
    return err;
  }
  std::vector<DWORD> before = console_hosts();
  FILETIME since;
  GetSystemTimeAsFileTime(&since);
  HRESULT hr = a.create(size_of(cols, rows), in_read, out_write, 0, &console_);
  // The console host has its own copies now.
  CloseHandle(in_read);
  CloseHandle(out_write);
  if (FAILED(hr)) {
    console_ = nullptr;
    trace("pty: CreatePseudoConsole failed: 0x%lx", static_cast<unsigned long>(hr));
    return HRESULT_FACILITY(hr) == FACILITY_WIN32 ? HRESULT_CODE(hr) : ERROR_GEN_FAILURE;
  }
  opened_ = true;
  trace("pty: pseudo console %dx%d", cols, rows);
  return contain_host(job, since, before);
}

DWORD WINAPI PseudoConsole::output_thread(LPVOID arg) {
  auto* self = static_cast<PseudoConsole*>(arg);
  char buf[16384];
  bool host_gone = false;
  for (;;) {
    DWORD n = 0;
    if (!ReadFile(self->console_out_, buf, sizeof buf, &n, nullptr) || n == 0) break;
    // A host that stopped reading costs only this thread; one that is gone
    // (its pipe broken) gets nothing more, and the console is still read to
    // its end, so the console host never waits on a full pipe.
    for (DWORD off = 0; off < n && !host_gone;) {
      DWORD w = 0;
      if (!WriteFile(self->host_out_, buf + off, n - off, &w, nullptr)) host_gone = true;
      off += w;
    }
  }
  CloseHandle(self->host_out_);  // the host's EOF
  self->host_out_ = nullptr;
  InterlockedExchange(&self->over_, 1);
  trace("pty: output over");
  PostQueuedCompletionStatus(self->port_, 0, kKeyTerminal, nullptr);
  return 0;
}

DWORD WINAPI PseudoConsole::input_thread(LPVOID arg) {
  auto* self = static_cast<PseudoConsole*>(arg);
  char buf[4096];
  for (;;) {
    DWORD n = 0;
    if (!ReadFile(self->host_in_, buf, sizeof buf, &n, nullptr) || n == 0) break;
    for (DWORD off = 0; off < n;) {
      DWORD w = 0;
      if (!WriteFile(self->console_in_, buf + off, n - off, &w, nullptr)) return 0;  // the console is closed
      off += w;
    }
  }
  // The host's input ended: the console's input stays open (as a terminal
  // whose keyboard is idle), until the console is closed.
  return 0;
}

void PseudoConsole::start(HANDLE port) {
  if (!opened_) return;
  port_ = port;
  // The anchor's standard handles are the relay's now (release_stdio closes none of them).
  SetStdHandle(STD_INPUT_HANDLE, nullptr);
  SetStdHandle(STD_OUTPUT_HANDLE, nullptr);
  out_thread_ = CreateThread(nullptr, 64 * 1024, output_thread, this, 0, nullptr);
  if (host_in_ && host_in_ != INVALID_HANDLE_VALUE) {
    HANDLE t = CreateThread(nullptr, 64 * 1024, input_thread, this, 0, nullptr);
    if (t) CloseHandle(t);
  }
}

void PseudoConsole::resize(int cols, int rows) {
  if (!console_ || closing_) return;
  HRESULT hr = api().resize(console_, size_of(cols, rows));
  trace("pty: resize %dx%d: 0x%lx", cols, rows, static_cast<unsigned long>(hr));
}

DWORD WINAPI PseudoConsole::close_thread(LPVOID arg) {
  auto* self = static_cast<PseudoConsole*>(arg);
  // It can wait until the output thread has read what the console still renders.
  api().close(self->console_);
  trace("pty: pseudo console closed");
  return 0;
}

void PseudoConsole::close() {
  if (!opened_ || InterlockedExchange(&closing_, 1)) return;
  trace("pty: closing the pseudo console");
  closer_ = CreateThread(nullptr, 64 * 1024, close_thread, this, 0, nullptr);
  if (!closer_) close_thread(this);
}

bool PseudoConsole::output_over() const { return !opened_ || over_ != 0 || !out_thread_; }

void PseudoConsole::finish() {
  if (!opened_) return;
  close();
  // What the output thread still copies reaches the host's pipe (bounded:
  // a host that does not read cannot hold the anchor's exit).
  if (out_thread_) WaitForSingleObject(out_thread_, 2000);
  // A console host that outlived its close (none should: it is in the job,
  // which the anchor's exit path has emptied) is ended here.
  if (host_process_ && WaitForSingleObject(host_process_, 0) == WAIT_TIMEOUT) {
    trace("pty: the console host still runs: terminated");
    TerminateProcess(host_process_, kKilledCode);
  }
}

}  // namespace anchor
}  // namespace cordon
