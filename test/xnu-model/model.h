// The wire between the shim (shim.cc, linked into the model's anchor and
// addon) and the model's kernel (kernel.cc): a stream socket, each message
// a 32-bit length and its bytes. Test code: nothing here ships.
#pragma once

#include <stdint.h>

namespace xnu_model {

enum Op : uint32_t {
  kListPids = 1,   // a: type, b: typeinfo, size: the caller's buffer (0: the size it needs)
  kPidInfo = 2,    // pid, a: flavor, c: arg, size
  kPidFdInfo = 3,  // pid, a: fd, b: flavor, size
  kPidPath = 4,    // pid, size
  kProcPid = 5,    // pid: kern.proc.pid
  kProcArgs2 = 6,  // pid, size: kern.procargs2
  kProcFind = 7,   // pid: 0 if proc_find() would find it (live), else ESRCH
  kStats = 8,      // the kernel's counters, as JSON text
  kModel = 9,      // pid: the model's own record of it, as JSON text (tests)
};

struct Request {
  uint32_t op;
  int32_t pid;
  uint32_t a;
  uint32_t b;
  uint64_t c;
  uint32_t size;
  int32_t caller;  // the calling process (getpid())
  uint32_t euid;   // its credentials (kauth_cred_getuid, kauth_cred_getruid)
  uint32_t ruid;
};

struct Reply {
  int32_t error;  // an errno value, 0 on success
  int32_t value;  // what the call returns besides the bytes (proc_listpids: the size it needs)
};

// Where the kernel listens, unless CORDON_XNU_MODEL names another socket.
#ifndef CORDON_XNU_MODEL_SOCKET
#define CORDON_XNU_MODEL_SOCKET "/tmp/cordon-xnu-model.sock"
#endif

}  // namespace xnu_model
