"""A rank SIGKILLs itself; the survivors get dpcore.CommError naming it, within seconds.

Usage: mpiexec -disable-auto-cleanup -n K python as_child.py python -m mpi4py die.py WHEN
  WHEN = between: the victim dies between collectives, the others wait for it to arrive;
         during:  the victim dies while a stream of large ring all-reduces is in flight.
The survivors print 'rank R: error SECONDS | MESSAGE', then 'rank R: again MESSAGE' for a barrier
on the broken communicator, and leave with os._exit(0) (MPI_Finalize would wait for the dead
rank). as_child.py keeps hydra from killing the survivors when the victim dies.
"""
import os
import re
import signal
import sys
import time

import numpy as np

import dpcore
from checks import say

when = sys.argv[1]
comm = dpcore.init(timeout=60)
rank, size = comm.rank, comm.size
victim = size - 1
x = np.ones(1 << 20, np.float32)  # 4 MiB: many ring segments

comm.all_reduce(x[:100])
comm.all_reduce(x, algo="ring")
say(rank, f"pid {os.getpid()}")
# MPI's own shared memory: without MPI_Finalize nobody unlinks it; the test removes it after.
mapped = set(re.findall(r"/dev/shm/(\S+)", open("/proc/self/maps").read()))
say(rank, f"mpi shm {' '.join(sorted(mapped)) or '-'}")
if rank == victim:
    if when == "during":
        for _ in range(3):
            comm.all_reduce(x, algo="ring", async_op=True)
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)

start = time.monotonic()
try:
    for _ in range(200):
        comm.all_reduce(x, algo="ring")
    say(rank, "no error")
except dpcore.CommError as e:
    say(rank, f"error {time.monotonic() - start:.2f} | {e}")
    try:  # the communicator stays broken, and says so at once
        comm.barrier()
        say(rank, "barrier after the failure succeeded")
    except dpcore.CommError as again:
        say(rank, f"again {again}")
os._exit(0)
