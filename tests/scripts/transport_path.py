"""The transport a communicator chose, and the path its all_reduce takes: through the node's
shared memory (hierarchical: a reduce-scatter and an all-gather there per call) or flat.

Usage: mpiexec -n K python -m mpi4py transport_path.py TRANSPORT PATH
  TRANSPORT: the comm.transport expected ("mpi", "shm+mpi", "shm")
  PATH: "hierarchical" when all_reduce must go through the node's shared memory, else "flat"
"""
import sys

import numpy as np

import dpcore
from checks import Checker, say

want_transport, want_path = sys.argv[1], sys.argv[2]
comm = dpcore.init()
check = Checker(comm.rank)
check.true(comm.transport == want_transport,
           f"transport {comm.transport!r}, expected {want_transport!r}")
backend = comm._backend
hierarchical = getattr(backend, "hierarchical", False)
check.true(hierarchical == (want_path == "hierarchical"),
           f"all_reduce path {'hierarchical' if hierarchical else 'flat'}, expected {want_path}")
for algo in ("ring", "one_shot"):
    before = backend.node_sequence if hierarchical else 0
    x = np.arange(1009, dtype=np.float32)
    check.equal(comm.all_reduce(x, algo=algo), x * comm.size, f"all_reduce algo={algo}")
    if hierarchical:
        check.true(backend.node_sequence == before + 2,
                   f"all_reduce algo={algo} did not go through the node's shared memory")
comm.close()
say(comm.rank, f"transport {want_transport} path {want_path}")
check.finish()
