"""A few collectives with DPCORE_TRACE set by the test: the ring ones record their steps.

Usage: DPCORE_TRACE=FILE mpiexec -n K python -m mpi4py trace_run.py
"""
import numpy as np

import dpcore
from checks import say

comm = dpcore.init()
x = np.arange(200_003, dtype=np.float32)
comm.all_reduce(x, out=x, algo="ring")
comm.all_reduce(x[:5], algo="one_shot")
comm.broadcast(x, root=comm.size - 1, algo="ring")
say(comm.rank, "ok")  # one write per line, so ranks' lines never interleave
