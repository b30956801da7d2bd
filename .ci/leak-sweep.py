#!/usr/bin/env python3
# The final leak check of .ci/run: every live process that carries
# CORDON_TEST_TAG in its environment is listed and SIGKILLed by pid, in a way
# a fast process (a pid hopper) cannot dodge. A process is SIGSTOPped the
# moment a walk reads the tag in its environment (a stopped process forks no
# more); walks go on until five in a row find nothing new; then everything
# found is SIGKILLed (and SIGCONTed so that it takes the kill at once), and
# walks go on until five in a row find nothing. Bounded: 30 s. Prints one line
# per process found; exit status 1 when it found any, 0 otherwise.
import os
import signal
import sys
import time

ME = os.getpid()
VAR = sys.argv[1] if len(sys.argv) > 1 else 'CORDON_TEST_TAG'  # (another variable: to try it)
MARK = VAR.encode() + b'='


def tagged():
    """Yields the pids of live tagged processes, as the walk reads them."""
    for name in os.listdir('/proc'):
        if not name.isdigit() or int(name) == ME:
            continue
        try:
            with open(f'/proc/{name}/environ', 'rb') as f:
                env = f.read()
        except OSError:
            continue
        if env.startswith(MARK) or (b'\0' + MARK) in env:
            yield int(name)


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
calm = 0
while calm < 5 and time.monotonic() < deadline:
    fresh = 0
    for pid in tagged():
        if pid in found:
            continue
        send(pid, signal.SIGSTOP)
        found[pid] = command(pid)
        fresh += 1
    calm = calm + 1 if fresh == 0 else 0
for pid in found:
    send(pid, signal.SIGKILL)
    send(pid, signal.SIGCONT)
empty = 0
while empty < 5 and time.monotonic() < deadline:
    left = list(tagged())
    empty = empty + 1 if not left else 0
    for pid in left:
        found.setdefault(pid, command(pid))
        send(pid, signal.SIGKILL)
if found:
    print(f'{len(found)} process(es) tagged {VAR} left behind (now SIGKILLed):')
    for pid, cmd in found.items():
        print(f'  pid {pid}: {cmd[:300]}')
    sys.exit(1)
print(f'no process tagged {VAR} is left')
