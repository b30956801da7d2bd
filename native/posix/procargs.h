// The argument area macOS returns for sysctl kern.procargs2, parsed. Pure (no
// I/O, no Darwin header), so it is compiled on every POSIX platform and tested
// on Linux with synthetic buffers (test/procargs.test.ts, through the addon).
//
// What XNU returns (bsd/kern/kern_sysctl.c sysctl_procargsx, bsd/kern/kern_exec.c
// exec_copyout_strings), for a buffer that holds the whole area:
//   int argc
//   the exec path (the string area's first string, without its
//     "executable_path=" prefix), its NUL, then NULs up to the pointer size
//     (8 for a 64-bit process) counted from the start of the string area,
//     i.e. up to a buffer offset o with (o + 12) % 8 == 0
//   argv[0..argc-1], each NUL-ended, back to back
//   the environment strings, each NUL-ended, back to back
//   0 to 7 NULs (pointer alignment: there may be none)
//   the apple[] strings the kernel made (ptr_munge=..., main_stack=, ...)
// It is the process's memory as it is now, not as it was at exec: a process
// that rewrites its title (libuv's process.title, setproctitle) overwrites
// the argv area and zero-fills the rest of it; some overwrite the environment
// area too (which then no longer holds the environment).
//
// Since macOS 11 the kernel withholds the environment of a cs_restricted
// target (the CS_RESTRICT code-signing flag, which code signing outside
// XNU's source sets: Apple's system binaries under SIP, such as /bin/sleep
// or /bin/sh, have it), unless the caller reads itself, SIP's dtrace
// restriction is off (CSR_ALLOW_UNRESTRICTED_DTRACE), or the caller has the
// Apple-private entitlement com.apple.private.read-environment-variables;
// root does not lift it. The buffer then ends where the
// kernel's own walk ends argv: past the exec path and every NUL after it,
// then argc strings, each NUL-ended (with an empty argv[0] that walk takes
// env[0] as the last argument, and so returns it).
//
// A buffer shorter than the area (the caller's buffer was too small) holds
// the area's tail, not its head: hints.capacity lets the parser say so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cordon {

// What the buffer says of the environment.
enum class ProcEnv {
  kPresent,   // a string follows argv (the apple[] strings, if the environment is empty: env -i)
  kWithheld,  // the buffer ends where the kernel cuts it when it withholds the environment
  kEmpty,     // nothing follows argv (the process is in the middle of an exec, or its area is zeroed)
};

// What the caller knows beyond the buffer.
struct ProcArgsHints {
  // The target's pointer size (8: every process macOS 11 and later runs;
  // 0: unknown). Locates argv[0] after the exec path's padding, so an empty
  // argv[0] is kept; where the padding does not fit it, argv[0] is the first
  // non-NUL byte after the exec path (as ps and psutil read it).
  size_t pointer_size = 8;
  // The caller reads its own area: the kernel never withholds it.
  bool self = false;
  // The size of the buffer the caller offered (0: unknown). A buffer filled
  // to it may hold only the area's tail (ProcArgs::cut).
  size_t capacity = 0;
};

struct ProcArgs {
  bool valid = false;             // the buffer holds argc (4 bytes) at least
  int argc = 0;                   // as the buffer says
  std::string exec_path;
  std::vector<std::string> argv;  // the arguments found (fewer than argc if the buffer ends first)
  bool argv_complete = false;     // all argc arguments accounted for, each NUL-ended
  // argv ended at a run of NULs (the zero-filled rest of a rewritten title's
  // area): the arguments it stands for are not listed.
  bool zero_filled = false;
  // The environment strings ("NAME=value"), each NUL-ended, from the first
  // string after argv (and after any run of NULs a rewritten title left) up
  // to an empty string or the end. Where XNU put no NUL between the
  // environment and the apple[] strings, those follow here too: they are the
  // kernel's "key=value" strings, never a CORDON_TREE entry. An unterminated
  // last string (a cut buffer) is left out.
  std::string env;
  size_t env_count = 0;
  ProcEnv verdict = ProcEnv::kEmpty;
  bool cut = false;  // the buffer filled hints.capacity: it may hold the area's tail only
};

// Parses `len` bytes at `data` as kern.procargs2 returns them. Never reads
// past data + len; any buffer (short, zeroed, argc negative or larger than
// the strings present) gives a result.
ProcArgs parse_procargs2(const char* data, size_t len, const ProcArgsHints& hints = ProcArgsHints{});

}  // namespace cordon
