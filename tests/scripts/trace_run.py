"""A few collectives with DPCORE_TRACE set by the test: the ring ones record their steps. Then
one data-parallel step, whose forward, backward and step go to the training lane.

Usage: DPCORE_TRACE=FILE mpiexec -n K python -m mpi4py trace_run.py
"""
import numpy as np

import dpcore
import dpcore.nn as nn
from checks import say
from dpcore.parallel import DataParallel

comm = dpcore.init()
x = np.arange(200_003, dtype=np.float32)
comm.all_reduce(x, out=x, algo="ring")
comm.all_reduce(x[:5], algo="one_shot")
comm.broadcast(x, root=comm.size - 1, algo="ring")
engine = DataParallel(nn.Linear(4, 2), comm)
engine(dpcore.Tensor(np.ones((3, 4), np.float32))).sum().backward()
engine.step()
say(comm.rank, "ok")  # one write per line, so ranks' lines never interleave
