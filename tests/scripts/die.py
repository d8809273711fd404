"""A rank SIGKILLs itself; the survivors get dpcore.CommError naming it, within seconds.

Usage: mpiexec -disable-auto-cleanup -n K python as_child.py python -m mpi4py die.py WHEN [COLL]
  WHEN = between: the victim dies between collectives, the others wait for it to arrive;
         during:  the victim dies while a stream of large calls is in flight.
  COLL = all_reduce (ring; the default), gather, scatter or all_to_all (direct): the calls.
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
coll = sys.argv[2] if len(sys.argv) > 2 else "all_reduce"
comm = dpcore.init(timeout=60)
rank, size = comm.rank, comm.size
victim = size - 1
x = np.ones(1 << 20, np.float32)  # 4 MiB: many ring segments
shard = np.empty(x.size // size, np.float32)
whole = x[:shard.size * size]  # every rank's shard of it
CALLS = {"all_reduce": lambda **kw: comm.all_reduce(x, algo="ring", **kw),
         "gather": lambda **kw: comm.gather(shard, algo="direct", **kw),
         "scatter": lambda **kw: comm.scatter(whole if rank == 0 else None, shard, algo="direct",
                                              **kw),
         "all_to_all": lambda **kw: comm.all_to_all(whole, algo="direct", **kw)}

comm.all_reduce(x[:100])
comm.all_reduce(x, algo="ring")
say(rank, f"pid {os.getpid()}")
# MPI's own shared memory: without MPI_Finalize nobody unlinks it; the test removes it after.
mapped = set(re.findall(r"/dev/shm/(\S+)", open("/proc/self/maps").read()))
say(rank, f"mpi shm {' '.join(sorted(mapped)) or '-'}")
if rank == victim:
    if when == "during":
        for _ in range(3):
            CALLS[coll](async_op=True)
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)

start = time.monotonic()
try:
    for _ in range(200):
        CALLS[coll]()
    say(rank, "no error")
except dpcore.CommError as e:
    say(rank, f"error {time.monotonic() - start:.2f} | {e}")
    try:  # the communicator stays broken, and says so at once
        comm.barrier()
        say(rank, "barrier after the failure succeeded")
    except dpcore.CommError as again:
        say(rank, f"again {again}")
os._exit(0)
