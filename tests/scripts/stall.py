"""A rank stalls (sleeps past the timeout) before a collective; the ranks waiting for it raise
dpcore.CommError naming it, at about the timeout, from Work.wait(); the late rank then fails at
once.

Usage: mpiexec -n K python -m mpi4py stall.py TIMEOUT [init|env]
  init: dpcore.init(timeout=TIMEOUT); env: DPCORE_TIMEOUT=TIMEOUT is set by the caller.
Every rank prints 'rank R: error SECONDS | MESSAGE'.
"""
import sys
import time

import numpy as np

import dpcore
from checks import say

timeout = float(sys.argv[1])
comm = dpcore.init(timeout=timeout) if sys.argv[2] == "init" else dpcore.init()
rank, size = comm.rank, comm.size
late = size - 1
x = np.ones(1 << 18, np.float32)

comm.all_reduce(x, algo="ring")  # #1: everybody is here
if rank == late:
    time.sleep(timeout + 3)
start = time.monotonic()
work = comm.all_reduce(x, algo="ring", async_op=True)  # #2: the error comes out of wait()
try:
    work.wait()
    say(rank, "no error")
except dpcore.CommError as e:
    say(rank, f"error {time.monotonic() - start:.2f} | {e}")
comm.close()
