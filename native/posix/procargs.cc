// kern.procargs2 buffers, parsed (procargs.h). Every scan is bounded by the
// buffer's length: a string that runs to the end has no NUL in the buffer.
#include "procargs.h"

#include <algorithm>
#include <cstring>

namespace cordon {
namespace {

// The length of the string at `at`, up to `end` (end - at: no NUL before it).
size_t bounded_len(const char* at, const char* end) {
  const void* nul = std::memchr(at, '\0', static_cast<size_t>(end - at));
  return nul ? static_cast<size_t>(static_cast<const char*>(nul) - at) : static_cast<size_t>(end - at);
}

const char* skip_nuls(const char* p, const char* end) {
  while (p < end && *p == '\0') p++;
  return p;
}

// Where the kernel's own walk ends argv when it withholds the environment
// (sysctl_procargsx): the exec path, every NUL after it, then `argc`
// strings, each with its NUL. Null if the buffer ends before that walk does
// (or a string in it has no NUL in the buffer).
const char* kernel_argv_end(const char* after_path, const char* end, int argc) {
  const char* p = skip_nuls(after_path, end);
  for (int i = 0; i < argc; i++) {
    if (p >= end) return nullptr;
    size_t n = bounded_len(p, end);
    if (p + n >= end) return nullptr;
    p += n + 1;
  }
  return p;
}

}  // namespace

ProcArgs parse_procargs2(const char* data, size_t len, const ProcArgsHints& hints) {
  ProcArgs out;
  if (data == nullptr || len < sizeof(int32_t)) return out;
  out.valid = true;
  out.cut = hints.capacity > 0 && len >= hints.capacity;
  int32_t argc = 0;
  std::memcpy(&argc, data, sizeof argc);
  out.argc = argc;
  const char* const begin = data + sizeof(int32_t);
  const char* const end = data + len;

  // The exec path.
  size_t path_len = bounded_len(begin, end);
  out.exec_path.assign(begin, path_len);
  const bool path_ended = begin + path_len < end;  // its NUL is in the buffer
  const char* after_path = path_ended ? begin + path_len + 1 : end;
  // argc can be no more than the strings the buffer can hold (one byte each).
  int count = argc < 0 ? 0 : static_cast<int>(std::min(static_cast<size_t>(argc), len));

  // argv[0]: at the pointer-aligned offset after the exec path's NUL (the
  // string area starts 12 bytes before the buffer's: the 4-byte argc is
  // there, the 16-byte "executable_path=" is not), if only NULs come before
  // it; otherwise at the first byte that is not a NUL.
  const char* arg = nullptr;
  if (hints.pointer_size > 0) {
    size_t ps = hints.pointer_size;
    size_t at = static_cast<size_t>(after_path - data);
    size_t aligned = (at + 12 + ps - 1) / ps * ps - 12;
    if (aligned <= len && skip_nuls(after_path, data + aligned) == data + aligned) arg = data + aligned;
  }
  if (arg == nullptr) arg = skip_nuls(after_path, end);

  // argv, up to argc strings. A rewritten title zero-fills the rest of the
  // argv area, and a long one leaves fewer NULs there than argc (libuv keeps
  // the last NUL and at least one after the title): so a run of NULs after
  // argv[0] ends argv where the run covers all the arguments still to come,
  // or where what follows it reads "NAME=value" (an environment string);
  // the arguments the run stands for are not listed. Otherwise the run is
  // that many empty arguments. (A command whose empty argument is followed
  // by one with a '=' loses the rest of its argv: read as environment
  // strings.)
  out.argv_complete = true;
  for (int i = 0; i < count; i++) {
    if (arg >= end) {
      out.argv_complete = false;
      break;
    }
    if (i > 0 && *arg == '\0') {
      const char* after = skip_nuls(arg, end);
      size_t run = static_cast<size_t>(after - arg);
      bool covers_rest = static_cast<size_t>(i) + run >= static_cast<size_t>(count);
      bool env_next = after < end && std::memchr(after, '=', bounded_len(after, end)) != nullptr;
      if (covers_rest || env_next) {
        out.zero_filled = true;
        arg = after;
        break;
      }
    }
    size_t n = bounded_len(arg, end);
    out.argv.emplace_back(arg, n);
    if (arg + n >= end) {  // no NUL: the buffer ends inside it
      out.argv_complete = false;
      arg = end;
      break;
    }
    arg += n + 1;
  }

  // The environment: after argv (and the run of NULs a rewritten title
  // left), up to an empty string.
  if (out.argv_complete) {
    const char* p = skip_nuls(arg, end);
    while (p < end && *p != '\0') {
      size_t n = bounded_len(p, end);
      if (p + n >= end) break;  // unterminated: the buffer was cut inside it
      out.env.append(p, n + 1);
      out.env_count++;
      p += n + 1;
    }
  }

  // The kernel withheld the environment when the buffer ends exactly where
  // its walk ends argv: a full area never does (the apple[] strings, at
  // least stack_guard=, malloc_entropy= and ptr_munge=, always follow argv).
  const char* cut_at = path_len > 0 && path_ended ? kernel_argv_end(after_path, end, count) : nullptr;
  if (cut_at == end && count == argc && !hints.self && !out.cut) {
    out.verdict = ProcEnv::kWithheld;
  } else if (out.env_count > 0) {
    out.verdict = ProcEnv::kPresent;
  } else {
    out.verdict = ProcEnv::kEmpty;
  }
  return out;
}

}  // namespace cordon
