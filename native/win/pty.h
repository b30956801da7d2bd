// The anchor's terminal on Windows (--pty COLS ROWS): a pseudo console
// (ConPTY, Windows 10 1809 and later). The anchor creates it before the
// command exists, the command is created attached to it
// (PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE), and the anchor relays the host's
// pipes, which only it holds: what the host writes on the anchor's standard
// input goes into the console's input (a Ctrl-C is the byte 0x03, which the
// console turns into CTRL_C_EVENT for its processes), and what the console
// renders (VT sequences) goes to the host's pipe on the anchor's standard
// output. RESIZE is ResizePseudoConsole.
//
// The console host (conhost.exe) that CreatePseudoConsole starts is the
// anchor's child: the anchor puts it in the tree's job at once (it runs,
// briefly, outside it: it is the system's program, and nothing of the
// command runs before it is in), so the forced stop, the host's handle on the
// job (kill-on-close) and every other way the tree ends end it too. It is not
// a member to the host: the job's member lists leave it out (job.h).
//
// The end of the output: the console host keeps its output pipe open until
// the pseudo console is closed, whoever still runs. Once the tree is empty
// but for the console host (every member gone), the anchor closes the pseudo
// console (ClosePseudoConsole, on a thread of its own: it can wait until the
// output is read, which the output thread does meanwhile), the console host
// gives its last output and exits, the output thread reads to the pipe's
// end, writes the rest to the host's pipe and closes it (EOF): output over.
// A member that stays is the host's waitDelay's (C4): the stop that follows
// ends the console host with it.
//
// The functions are loaded from kernel32 at run time (GetProcAddress), so the
// anchor still starts where they are absent; there --pty is refused (EXECFAIL
// ENOSYS; the host's capabilities() refuses first).
//
// Not built on Windows' own console semantics beyond these calls: measured
// under Wine 8 (test/win/pty.test.mjs), the command attaches to the pseudo
// console but Wine gives it no standard handles on it, so a program's
// ordinary output does not reach it; on Windows itself only the GitHub
// windows job runs it.
#pragma once

#include "anchor.h"
#include "job.h"

#include <string>
#include <vector>

namespace cordon {
namespace anchor {

class PseudoConsole {
 public:
  PseudoConsole() = default;
  PseudoConsole(const PseudoConsole&) = delete;
  PseudoConsole& operator=(const PseudoConsole&) = delete;

  // Whether this Windows has ConPTY (kernel32 exports its three functions).
  static bool available();

  // Creates the pseudo console, cols x rows, and puts its console host in
  // `job` (when held). 0, or the Win32 error that kept it from being made.
  // The anchor's standard handles (the host's pipes) are taken as the
  // relay's ends from here on and made uninheritable; the anchor's standard
  // handles become none.
  DWORD open(int cols, int rows, Job& job);
  bool active() const { return console_ != nullptr || opened_; }
  // The value for PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE.
  void* handle() const { return console_; }
  // The console host's pid (0: not found), which the job's member lists leave out.
  DWORD host_pid() const { return host_pid_; }

  // Once the command exists: starts the relay threads. `port`: where
  // kKeyTerminal is posted when the output is over.
  void start(HANDLE port);
  // RESIZE.
  void resize(int cols, int rows);
  // Closes the pseudo console (once; on a thread of its own).
  void close();
  // The output is over: read to its end and handed to the host's pipe, which is closed.
  bool output_over() const;
  // Before the anchor exits: the pseudo console closed, and what the output
  // thread still copies reaches the host's pipe (2 s at most).
  void finish();

 private:
  static DWORD WINAPI output_thread(LPVOID self);
  static DWORD WINAPI input_thread(LPVOID self);
  static DWORD WINAPI close_thread(LPVOID self);
  DWORD contain_host(Job& job, const FILETIME& since, const std::vector<DWORD>& before);

  bool opened_ = false;
  void* console_ = nullptr;
  HANDLE console_in_ = nullptr;   // we write: the console's input
  HANDLE console_out_ = nullptr;  // we read: what the console renders
  HANDLE host_in_ = nullptr;      // the host's input pipe (the anchor's stdin)
  HANDLE host_out_ = nullptr;     // the host's output pipe (the anchor's stdout)
  HANDLE host_process_ = nullptr;  // the console host
  DWORD host_pid_ = 0;
  HANDLE port_ = nullptr;
  HANDLE out_thread_ = nullptr;
  HANDLE closer_ = nullptr;
  volatile LONG closing_ = 0;
  volatile LONG over_ = 0;
};

}  // namespace anchor
}  // namespace cordon
