"""A rank closes its communicator while the others call one more collective (a program that
skipped a call on one rank); they raise dpcore.CommError naming it within about a second,
instead of waiting out the 60 s timeout. The rank that left stays alive meanwhile, so this is
not the dead-peer check.

Usage: mpiexec -n K python -m mpi4py leave.py
Every rank but the last prints 'rank R: error SECONDS | MESSAGE'.
"""
import time

import numpy as np
from mpi4py import MPI

import dpcore
from checks import say

comm = dpcore.init()
rank, size = comm.rank, comm.size
leaver = size - 1
x = np.ones(1 << 16, np.float32)
comm.all_reduce(x)  # #1: everybody is here
if rank == leaver:
    comm.close()
else:
    start = time.monotonic()
    try:
        comm.all_reduce(x)  # #2: the leaver never calls it
        say(rank, "no error")
    except dpcore.CommError as e:
        say(rank, f"error {time.monotonic() - start:.2f} | {e}")
    comm.close()
MPI.COMM_WORLD.Barrier()
say(rank, "ok")
