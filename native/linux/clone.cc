// clone_shared(): the anchor starts its command in a child that shares the
// anchor's memory until it execs (CLONE_VM, on a stack of its own), as glibc's
// posix_spawn does. fork() copies the anchor's page tables and then takes a
// copy-on-write fault for every page either side touches before the exec;
// in a virtual machine each of those costs (measured on this project's 2-core
// VMs: fork, then exec of /bin/true done, 1.1 ms; the same child with
// CLONE_VM 0.47 ms).
//
// What the child may do while it shares the anchor's memory (the anchor goes
// on running: it leaves the host's session and opens the barrier while the
// child waits on it; see native/posix/command_child.cc): no allocation, no
// stdio, no write to memory the anchor uses, every signal blocked until the
// dispositions are back to their defaults (a handler of the anchor's would
// otherwise run in the child, on the anchor's memory). Its descriptor table
// and signal handlers are its own (no CLONE_FILES, no CLONE_SIGHAND); errno
// is shared (same thread pointer), which is why the anchor's handlers are
// SA_RESTART: its reads and writes in that window never look at errno.
//
// glibc has no clone3() wrapper, and a child on a new stack cannot return
// into its caller's frames: a few lines of assembly per architecture make the
// call and run `main` in the child. Elsewhere -ENOSYS (the caller forks).
#include <errno.h>
#include <sys/mman.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>

#include "internal.h"

namespace cordon {

namespace {

#if defined(__x86_64__) || defined(__aarch64__)
constexpr long kClone3 = 435;
constexpr uint64_t kCloneVm = 0x100;
constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;
// The child's stack: exec_command's frames and the C library's calls it
// makes (signal(), snprintf() of a pid) need a few KiB; below it one guard
// page, so an overflow faults instead of writing over the anchor's memory.
constexpr size_t kStackSize = 256 * 1024;
constexpr size_t kGuard = 64 * 1024;  // at least one page on every page size Linux uses

// clone3(args, size); in the child (0) main(arg), which does not return (if
// it did: _exit(127)). The parent gets the child's pid or a negative errno.
__attribute__((noinline)) long clone3_run(uint64_t* args, unsigned long size, void (*main)(void*), void* arg) {
#if defined(__x86_64__)
  long ret;
  register void (*fn)(void*) asm("r12") = main;
  register void* fn_arg asm("r13") = arg;
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      // The child, on its own stack (the kernel set rsp to its top).
      "xorl %%ebp, %%ebp\n\t"
      "movq %%r13, %%rdi\n\t"
      "callq *%%r12\n\t"
      "movl $127, %%edi\n\t"
      "movl $60, %%eax\n\t"  // exit
      "syscall\n\t"
      "hlt\n\t"
      "1:\n\t"
      : "=a"(ret)
      : "0"(kClone3), "D"(args), "S"(size), "r"(fn), "r"(fn_arg)
      : "rcx", "r11", "memory", "cc");
  return ret;
#else
  register long x0 asm("x0") = reinterpret_cast<long>(args);
  register unsigned long x1 asm("x1") = size;
  register long x8 asm("x8") = kClone3;
  register void (*fn)(void*) asm("x19") = main;
  register void* fn_arg asm("x20") = arg;
  asm volatile(
      "svc #0\n\t"
      "cbnz x0, 1f\n\t"
      // The child, on its own stack.
      "mov x29, xzr\n\t"
      "mov x30, xzr\n\t"
      "mov x0, x20\n\t"
      "blr x19\n\t"
      "mov x0, #127\n\t"
      "mov x8, #93\n\t"  // exit
      "svc #0\n\t"
      "1:\n\t"
      : "+r"(x0)
      : "r"(x1), "r"(x8), "r"(fn), "r"(fn_arg)
      : "memory", "cc");
  return x0;
#endif
}
#endif

}  // namespace

SharedChild clone_shared(int cgroup_fd, void (*main)(void*), void* arg) {
  SharedChild out;
#if defined(__x86_64__) || defined(__aarch64__)
  void* map = mmap(nullptr, kGuard + kStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (map == MAP_FAILED) {
    out.pid = -errno;
    return out;
  }
  if (mprotect(map, kGuard, PROT_NONE) != 0) {
    out.pid = -errno;
    munmap(map, kGuard + kStackSize);
    return out;
  }
  // struct clone_args (Linux 5.7, with cgroup): 11 u64 fields.
  uint64_t args[11] = {};
  args[0] = kCloneVm | (cgroup_fd >= 0 ? kCloneIntoCgroup : 0);  // flags
  args[4] = SIGCHLD;                                              // exit_signal
  args[5] = reinterpret_cast<uint64_t>(map) + kGuard;             // stack (its lowest address)
  args[6] = kStackSize;                                           // stack_size
  if (cgroup_fd >= 0) args[10] = static_cast<uint64_t>(cgroup_fd);
  long pid = clone3_run(args, sizeof args, main, arg);
  if (pid < 0) {
    munmap(map, kGuard + kStackSize);
    out.pid = pid;  // (the raw call's negative errno)
    return out;
  }
  out.pid = pid;
  out.stack = map;
  out.stack_size = kGuard + kStackSize;
#else
  (void)cgroup_fd;
  (void)main;
  (void)arg;
  out.pid = -ENOSYS;
#endif
  return out;
}

}  // namespace cordon
