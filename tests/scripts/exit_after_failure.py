"""A survivor leaves Python normally after its CommError, while the peer that failed lingers and
never finalizes MPI: the survivor's process must end within seconds, not wait in MPI_Finalize
for the peer. Rank 1 makes the call fail (it calls another collective), then watches rank 0's
pid for up to 20 s and prints 'rank 1: survivor ended after SECONDS' or 'rank 1: survivor
still running after 20 s'; rank 0 prints 'rank 0: error | MESSAGE' and its script ends. Each
rank first prints 'rank R: mpi shm NAMES' (MPICH's segments, which nobody's MPI_Finalize will
remove now).

Usage: mpiexec -n 2 python -m mpi4py exit_after_failure.py
"""
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import dpcore
from checks import say
from fault_kit import mpi_shm_segments

comm = dpcore.init()
pids = MPI.COMM_WORLD.allgather(os.getpid())
say(comm.rank, f"mpi shm {mpi_shm_segments()}")
try:
    if comm.rank == 1:
        comm.broadcast(np.ones(4))
    else:
        comm.all_reduce(np.ones(4))
except dpcore.CommError as e:
    failed = time.monotonic()
    if comm.rank == 0:
        say(0, f"error | {e}")
        sys.exit(0)  # Python's normal end: atexit, then MPI_Finalize
    while time.monotonic() - failed < 20:
        if dpcore.setup.bootstrap.process_gone(pids[0]):
            say(1, f"survivor ended after {time.monotonic() - failed:.2f}")
            break
        time.sleep(0.05)
    else:
        say(1, "survivor still running after 20 s")
    os._exit(0)  # the failed peer never finalizes
