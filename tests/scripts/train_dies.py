"""`python -m dpcore.train ARGS` as the command line runs it (runpy, the same module as
__main__), except that after its STEP-th optimizer step the last rank
  kill:  SIGKILLs itself (the survivors' next collective raises CommError), or
  raise: raises RuntimeError alone (the others wait in their next collective).

Usage: mpiexec -disable-auto-cleanup -n K python as_child.py python train_dies.py HOW STEP DIR ...
At that step every rank first writes DIR/rankR.txt, 'rank R: mpi shm NAMES': that it got there,
and the MPI segments it maps, for the test to remove what MPI_Finalize would have (neither the
victim nor an ended job runs it). A file, as MPI_Abort may end a job before its output is out.
No `python -m mpi4py` here: the point is what dpcore.train itself does after an error.
"""
import os
import re
import runpy
import signal
import sys

from mpi4py import MPI

from dpcore.parallel import DataParallel

how, last_step, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.argv = [sys.argv[0], *sys.argv[4:]]
rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
step, done = DataParallel.step, []


def step_then_fail(engine):
    step(engine)
    done.append(1)
    if len(done) == last_step:
        mapped = set(re.findall(r"/dev/shm/(\S+)", open("/proc/self/maps").read()))
        with open(os.path.join(directory, f"rank{rank}.txt"), "w") as f:
            f.write(f"rank {rank}: mpi shm {' '.join(sorted(mapped)) or '-'}\n")
        if rank == size - 1 and how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if rank == size - 1 and how == "raise":
            raise RuntimeError(f"rank {rank} fails alone")


DataParallel.step = step_then_fail
runpy.run_module("dpcore.train", run_name="__main__", alter_sys=True)
