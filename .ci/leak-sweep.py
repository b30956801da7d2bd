#!/usr/bin/env python3
# The final leak check of .ci/run: every live process that carries
# CORDON_TEST_TAG in its environment is listed and SIGKILLed by pid, in a way
# a fast process (a pid hopper) cannot dodge; the same check as the suite's
# killTagged (test/helpers/procs.ts). A walk reads the pids just above the
# newest it knows first (where a hopper's next generation will be), then the
# pids new since its previous walk, then the rest, newest first; a process is
# SIGSTOPped the moment a walk reads the tag in its environment (a stopped
# process forks no more). Walks go on until 10 in a row find no tagged
# process that is not stopped already; then everything found is SIGKILLed
# (and SIGCONTed so that it takes the kill at once), and walks go on until 5
# in a row find nothing alive; one that finds a process not found before
# stops it and goes back to the freeze. Bounded: 30 s. Prints one line per
# process found; exit status 1 when it found any, 0 otherwise.
import os
import signal
import sys
import time

ME = os.getpid()
VAR = sys.argv[1] if len(sys.argv) > 1 else 'CORDON_TEST_TAG'  # (another variable: to try it)
MARK = VAR.encode() + b'='


CALM_WALKS = 10
EMPTY_WALKS = 5
LOOK_AHEAD = 32
try:
    with open('/proc/sys/kernel/pid_max') as f:
        PID_MAX = int(f.read())
except (OSError, ValueError):
    PID_MAX = 32768
previous = set()
newest = 0


def marked(pid):
    try:
        with open(f'/proc/{pid}/environ', 'rb') as f:
            env = f.read()
    except OSError:
        return False
    return env.startswith(MARK) or (b'\0' + MARK) in env


def state(pid):
    """The one-letter state of the process ('' when gone)."""
    try:
        with open(f'/proc/{pid}/stat', 'rb') as f:
            s = f.read()
        return s[s.rindex(b')') + 2:][:1].decode()
    except (OSError, ValueError):
        return ''


def tagged():
    """Yields (pid, state) of live tagged processes, as the walk reads them:
    the pids above the newest first, then the new ones, then the rest."""
    global previous, newest
    listed = sorted((int(n) for n in os.listdir('/proc') if n.isdigit()), reverse=True)
    fresh = [p for p in listed if p not in previous]
    previous = set(listed)
    newest = fresh[0] if fresh else (listed[0] if listed else newest)
    ahead = [newest + i if newest + i < PID_MAX else newest + i - PID_MAX + 300 for i in range(1, LOOK_AHEAD + 1)]
    read = set()
    for pid in ahead + fresh + listed:
        if pid in read or pid == ME:
            continue
        read.add(pid)
        if not marked(pid):
            continue
        st = state(pid)
        if st and st not in 'ZX':
            yield pid, st


def send(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def command(pid):
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            return f.read().replace(b'\0', b' ').decode(errors='replace').strip()
    except OSError:
        return '(gone)'


deadline = time.monotonic() + 30
found = {}
again = True
while again and time.monotonic() < deadline:
    again = False
    calm = 0
    while calm < CALM_WALKS and time.monotonic() < deadline:
        running = 0
        for pid, st in tagged():
            if pid in found and st in 'TtD':
                continue
            send(pid, signal.SIGSTOP)
            found.setdefault(pid, command(pid))
            running += 1
        calm = calm + 1 if running == 0 else 0
    for pid in found:
        send(pid, signal.SIGKILL)
        send(pid, signal.SIGCONT)
    empty = 0
    while empty < EMPTY_WALKS and not again and time.monotonic() < deadline:
        left = 0
        for pid, st in tagged():
            left += 1
            if pid in found:
                send(pid, signal.SIGKILL)
            else:
                send(pid, signal.SIGSTOP)
                found[pid] = command(pid)
                again = True
        empty = empty + 1 if left == 0 else 0
if found:
    print(f'{len(found)} process(es) tagged {VAR} left behind (now SIGKILLed):')
    for pid, cmd in found.items():
        print(f'  pid {pid}: {cmd[:300]}')
    sys.exit(1)
print(f'no process tagged {VAR} is left')
