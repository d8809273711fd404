"""What the peer-fault scripts share: a directory of marks (files holding a time.time()) through
which the ranks tell each other when a fault happened and who is done, a watchdog that ends a
rank that waits too long, a reaper for a rank that cannot end by itself, and the lines they
print.

A mark is written atomically (a temporary file, then os.replace), so a reader sees it whole or
not at all. The scripts run under `mpiexec -disable-auto-cleanup ... python as_child.py python
SCRIPT` (no `-m mpi4py`: a rank's uncaught exception must not turn into MPI_Abort), and leave
with os._exit: MPI_Finalize would wait for the dead rank.

The watchdog and the reaper are processes of their own (this file, run as a program): a rank
stuck in MPI may hold the GIL (mpi4py's pickle collectives duplicate a communicator without
releasing it), so no thread of its own could speak for it. Both ignore SIGUSR1, as as_child.py
does: hydra sends it to every rank's process group when a rank exits, and the exec resets the
rank's MPI handler for it to the default action, to terminate.

Lines, one write each ('rank R: TAG rest'):
    pid PID                   this rank's pid
    mpi shm NAMES             MPICH's own /dev/shm segments this rank maps (for the test to remove:
                              MPI_Finalize, which unlinks them, is never reached)
    error SECONDS | MESSAGE   the CommError (or other error) this rank got, SECONDS after the fault
    hang SECONDS | WHAT       the watchdog: still waiting SECONDS after the fault (it then
                              killed the rank)
"""
import os
import re
import signal
import subprocess
import sys
import time

# How long after the fault a rank may still wait before the watchdog gives up on it: long
# enough to tell a slow detection from a hang, short enough that a hang costs little. The
# contract's bound is checked by the tests, not here.
GRACE = float(os.environ.get("FAULT_GRACE", "15"))
# Whatever happens, no rank outlives this (seconds from its start).
LIFETIME = float(os.environ.get("FAULT_LIFETIME", "120"))


def say(rank, message):
    """Print 'rank R: message' in one write, so lines of different ranks never interleave."""
    sys.stdout.write(f"rank {rank}: {message}\n")
    sys.stdout.flush()


class Marks:
    """Files in `directory`, each holding the time.time() at which it was made."""

    def __init__(self, directory):
        self.directory = directory

    def path(self, name):
        return os.path.join(self.directory, name)

    def make(self, name, when=None):
        when = time.time() if when is None else when
        tmp = self.path(f".{name}.{os.getpid()}")
        with open(tmp, "w") as f:
            f.write(repr(when))
        os.replace(tmp, self.path(name))
        return when

    def get(self, name):
        """The time in mark `name`, or None if there is none yet."""
        try:
            with open(self.path(name)) as f:
                return float(f.read())
        except (FileNotFoundError, ValueError):
            return None

    def wait(self, names, seconds):
        """Wait until every mark in `names` exists, at most `seconds`; True if they all do."""
        deadline = time.monotonic() + seconds
        while True:
            if all(self.get(n) is not None for n in names):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def report_error(rank, marks, fault_mark, error):
    """'rank R: error SECONDS | TYPE: MESSAGE', SECONDS since the fault (mark `fault_mark`)."""
    now = time.time()
    fault = marks.get(fault_mark)
    seconds = f"{now - fault:.2f}" if fault is not None else "nan"
    message = " ".join(str(error).split())  # one line
    say(rank, f"error {seconds} | {type(error).__name__}: {message}")


def mpi_shm_segments():
    """The /dev/shm names this process maps (MPICH's own, once MPI is initialised)."""
    with open("/proc/self/maps") as f:
        names = set(re.findall(r"/dev/shm/(\S+)", f.read()))
    return " ".join(sorted(n for n in names if not n.startswith("dpcore-"))) or "-"


def _helper(marks, *args, quiet):
    """Start this file as a program, beside the calling rank (same session, so a test's
    timeout kills it too), and wait until it ignores SIGUSR1 (it says so with a mark)."""
    out = subprocess.DEVNULL if quiet else None  # the watchdog prints to the rank's stdout
    helper = subprocess.Popen([sys.executable, os.path.abspath(__file__), *map(str, args)],
                              stdin=subprocess.DEVNULL, stdout=out, stderr=out, close_fds=True)
    if not marks.wait([f"ready.{helper.pid}"], 30):
        raise RuntimeError(f"fault_kit: the {args[0]} helper did not start")


def start_watchdog(rank, marks, fault_mark, what, cont_pid=None):
    """Watch this rank from another process: once GRACE seconds have passed since the fault
    (mark `fault_mark`) or LIFETIME since now, and the rank has not made its mark 'done.R', print
    'rank R: hang SECONDS | WHAT' for it, make 'done.R' (as a rank that reported does), SIGKILL
    it, and SIGCONT `cont_pid` (a stopped peer, making the mark 'cont') if given."""
    _helper(marks, "watch", marks.directory, rank, os.getpid(), fault_mark, what, cont_pid or 0,
            quiet=False)


def start_reaper(marks, names, seconds=LIFETIME):
    """SIGKILL this process, from another one, once every mark in `names` exists (or after
    `seconds`). For a rank whose fault leaves it alive in a way that would hold the job open: a
    Python that exits after an uncaught exception or sys.exit runs MPI_Finalize, which waits for
    the ranks that left with os._exit, forever."""
    _helper(marks, "reap", marks.directory, os.getpid(), seconds, *names, quiet=True)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def _watch(directory, rank, pid, fault_mark, what, cont_pid):
    marks, started = Marks(directory), time.monotonic()
    while _alive(pid) and marks.get(f"done.{rank}") is None:
        fault = marks.get(fault_mark)
        if fault is not None and time.time() - fault > GRACE:
            seconds, note = f"{time.time() - fault:.2f}", ""
        elif time.monotonic() - started > LIFETIME:
            seconds, note = "nan", f" (no fault after {LIFETIME:.0f} s)"
        else:
            time.sleep(0.1)
            continue
        os.kill(pid, signal.SIGKILL)
        say(rank, f"hang {seconds} | {what}{note}")
        marks.make(f"done.{rank}")
        if cont_pid:
            marks.make("cont")
            os.kill(cont_pid, signal.SIGCONT)
        return


def _reap(directory, pid, seconds, names):
    deadline = time.time() + seconds
    while time.time() < deadline and not all(os.path.exists(os.path.join(directory, n))
                                             for n in names):
        time.sleep(0.1)
    time.sleep(0.5)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    Marks(sys.argv[2]).make(f"ready.{os.getpid()}")
    if sys.argv[1] == "watch":
        d, r, p, mark, what, cont = sys.argv[2:8]
        _watch(d, int(r), int(p), mark, what, int(cont))
    elif sys.argv[1] == "reap":
        _reap(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5:])
