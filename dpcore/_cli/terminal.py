"""Whether this process's stderr reaches a terminal: a progress bar's frames belong there, and not
in a log file or a pipe. Under a launcher a rank's stderr is a pipe to the launcher even while
the user watches it in a terminal: there the launcher's own stderr decides."""
import os

LAUNCHERS = ("mpiexec", "mpiexec.hydra", "mpirun", "orterun", "prterun")


def stderr_is_terminal():
    """os.isatty(2), or, under mpiexec on this host, whether mpiexec's stderr is a terminal."""
    if os.isatty(2):
        return True
    for pid in _ancestors(os.getpid()):
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
            if name in LAUNCHERS:
                return os.readlink(f"/proc/{pid}/fd/2").startswith(("/dev/pts/", "/dev/tty"))
        except OSError:  # gone, or not ours to read (/proc/PID/fd is the owner's)
            return False
    return False


def _ancestors(pid):
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            return
        pid = int(stat[stat.rindex(")") + 2:].split()[1])  # after the name: state, ppid
        yield pid
