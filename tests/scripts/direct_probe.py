"""Reports whether this communicator may use the direct algorithm; where it may not, asking for
it is a local ValueError that leaves the communicator usable.

Usage: mpiexec -n K python -m mpi4py direct_probe.py
"""
import numpy as np

import dpcore
from checks import say

comm = dpcore.init()
if not comm.direct:
    try:
        comm.all_reduce(np.ones(3, np.float32), algo="direct")
        raise AssertionError("algo=direct ran where the ranks may not read each other's memory")
    except ValueError as e:
        assert "process_vm_readv" in str(e), e
x = np.full(5, comm.rank, np.float32)
comm.broadcast(x, root=comm.size - 1, algo="direct" if comm.direct else "ring")
assert (x == comm.size - 1).all(), x
say(comm.rank, f"direct {comm.direct}")
say(comm.rank, "ok")
