"""Collectives with DPCORE_TRACE set by the test, then every rank dies without exiting normally
(`kill`: SIGKILL; `exit`: os._exit), so nothing runs at exit: what the trace holds is what each
rank streamed as it went. The first all-reduce has more ring steps than a streaming trace may hold
in memory (DPCORE_SLOT_BYTES set small by the test): each rank prints the most it held, and
MPICH's segments, for the test to remove.

Usage: DPCORE_TRACE=FILE DPCORE_SLOT_BYTES=256 mpiexec -n K python -m mpi4py trace_killed.py
       kill|exit
"""
import os
import signal
import sys

import numpy as np

import dpcore
from checks import say
from dpcore.tensor import Tensor
from fault_kit import mpi_shm_segments

comm = dpcore.init()
x = np.arange(200_003, dtype=np.float32)
comm.all_reduce(x, out=x, algo="ring")
for _ in range(3):
    comm.all_reduce(x[:5], algo="one_shot")
(Tensor(np.ones(3, np.float32), requires_grad=True) * 2).sum().backward()  # a training span
comm.broadcast(x[:1000], root=0, algo="ring")  # the last collective: each rank dies after it
say(comm.rank, f"peak {comm._backend.trace_peak()}")
say(comm.rank, f"mpi shm {mpi_shm_segments()}")  # no MPI_Finalize will unlink them
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
os._exit(3)
