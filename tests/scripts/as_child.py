"""Run a command as a child process and exit with its status as a plain exit code.

For the tests where a rank kills itself: MPICH's hydra proxy SIGKILLs every rank as soon as one of
its direct children dies by a signal, even with -disable-auto-cleanup, and it announces a dead rank
to the others with SIGUSR1, whose default action is to terminate. Under this wrapper the victim's
death reaches hydra as exit code 137, and SIGUSR1 is ignored (by the wrapper and, inherited, by the
rank), so the survivors live on to report what dpcore told them.

Usage: mpiexec -disable-auto-cleanup -n K python as_child.py python -m mpi4py script.py ...
"""
import signal
import subprocess
import sys

signal.signal(signal.SIGUSR1, signal.SIG_IGN)
# close_fds=False: the rank needs the PMI socket that hydra passed to us.
status = subprocess.call(sys.argv[1:], close_fds=False)
sys.exit(status if status >= 0 else 128 - status)
