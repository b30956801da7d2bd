# A terminal for tests: runs argv as the foreground job of a new pseudo-
# terminal (a session of its own, the pty its controlling terminal), copies
# everything the terminal shows to stdout, and types what the test asks for:
# a line "INTR" on stdin types the terminal's interrupt character (Ctrl-C), so
# the kernel's line discipline sends SIGINT to the terminal's foreground
# process group, as a user's Ctrl-C does; "TYPE <text>" types the text and
# Enter; "SIZE <cols> <rows>" resizes the terminal's window (the kernel sends
# its foreground process group SIGWINCH). When argv exits it prints
# "PTY-EXIT <code>" (or "PTY-SIGNAL <n>") and exits 0.
#   python3 terminal.py -- argv...
import fcntl, os, pty, select, struct, sys, termios

argv = sys.argv[sys.argv.index('--') + 1:]
pid, master = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)

intr = termios.tcgetattr(master)[6][termios.VINTR]
stdin_open = True
master_open = True
status = None
while True:
    fds = ([master] if master_open else []) + ([0] if stdin_open else [])
    ready, _, _ = select.select(fds, [], [], 0.05)
    if master in ready:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: no process has the terminal open any more
            data = b''
        if data:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            master_open = False
    if 0 in ready:
        line = sys.stdin.readline()
        if not line:
            stdin_open = False
        elif line.strip() == 'INTR':
            os.write(master, intr if isinstance(intr, bytes) else bytes([intr]))
        elif line.startswith('TYPE '):
            os.write(master, line[5:].rstrip('\n').encode() + b'\r')
        elif line.startswith('SIZE '):
            cols, rows = (int(w) for w in line.split()[1:3])
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack('HHHH', rows, cols, 0, 0))
    if status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
    # Once argv has exited: what it wrote is shown, then done (a member that
    # still holds the terminal does not keep this helper waiting).
    if status is not None and (not master_open or master not in ready):
        break
if os.WIFEXITED(status):
    print('\nPTY-EXIT %d' % os.WEXITSTATUS(status), flush=True)
else:
    print('\nPTY-SIGNAL %d' % os.WTERMSIG(status), flush=True)
