# Starts a command on a chosen free pid with clone3's set_tid (Linux >= 5.5;
# needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE over the pid namespace), for
# helpers/pids.ts:
#
#   python3 set-tid.py <target> <command> [args...]
#
# The kernel puts the new process on exactly <target> or fails: the pid
# counter is not moved, so no other process on the machine is handed a pid
# out of turn (writing target-1 to ns_last_pid and forking did: every process
# that forked before the counter was set back got a pid just freed, in the
# same second, by whichever test had it). The command runs in a session of its
# own, with this process's environment as it was given (what
# /proc/self/environ holds: Python's own changes, such as a coerced locale,
# are left out). Says one line, then:
#
#   PID occupant <target>    and waits for it (exit 0)
#   TAKEN <errno name>       the kernel has the pid in use (EEXIST): a live
#                            process, or a zombie's group or session id (exit 2)
#   UNAVAILABLE <why>        clone3 or set_tid is not allowed here (exit 3)
import ctypes
import errno
import os
import platform
import signal
import struct
import sys

# clone3 is 435 in the generic table and on x86_64 alike.
CLONE3 = {'x86_64': 435, 'aarch64': 435, 'arm64': 435}.get(platform.machine())


def say(line, code=None):
    sys.stdout.write(line + '\n')
    sys.stdout.flush()
    if code is not None:
        sys.exit(code)


def main():
    target = int(sys.argv[1])
    argv = sys.argv[2:]
    if CLONE3 is None:
        say(f'UNAVAILABLE no clone3 number known for {platform.machine()}', 3)
    with open('/proc/self/environ', 'rb') as f:
        env = dict(e.split(b'=', 1) for e in f.read().split(b'\0') if b'=' in e)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    tids = (ctypes.c_int * 1)(target)
    # struct clone_args up to set_tid_size (CLONE_ARGS_SIZE_VER1, 80 bytes):
    # flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
    # tls, set_tid, set_tid_size.
    args = ctypes.create_string_buffer(struct.pack('10Q', 0, 0, 0, 0, signal.SIGCHLD, 0, 0, 0, ctypes.addressof(tids), 1))
    pid = libc.syscall(ctypes.c_long(CLONE3), args, ctypes.c_size_t(80))
    if pid == 0:
        # The child: a copy of this process, one thread; only system calls
        # until the exec.
        try:
            os.setsid()
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    if pid < 0:
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            say('TAKEN EEXIST', 2)
        say(f'UNAVAILABLE clone3 with set_tid: {errno.errorcode.get(err, err)} ({os.strerror(err)})', 3)
    if pid != target:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        say(f'UNAVAILABLE clone3 gave pid {pid}, not {target}', 3)
    say(f'PID occupant {pid}')
    os.waitpid(pid, 0)


main()
