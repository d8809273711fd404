"""Reports whether this communicator may use the direct algorithm, and checks that asking for it
where it does not apply is a local ValueError that leaves the communicator usable.

Usage: mpiexec -n K python -m mpi4py direct_probe.py
"""
import numpy as np

import dpcore
from checks import say

comm = dpcore.init()
try:
    comm.all_reduce(np.ones(3, np.float32), algo="direct")
    say(comm.rank, "error no ValueError for all_reduce with algo=direct")
except ValueError as e:
    assert "all_gather and broadcast" in str(e), e
x = np.full(5, comm.rank, np.float32)
comm.broadcast(x, root=comm.size - 1, algo="direct" if comm.direct else "ring")
assert (x == comm.size - 1).all(), x
say(comm.rank, f"direct {comm.direct}")
say(comm.rank, "ok")
