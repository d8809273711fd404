"""Communicators dropped without close() give their MPI communicators back when they are
garbage-collected, so a program may make many more than MPICH's context ids (about 2048, two or
three per dpcore communicator) would allow: COUNT of them, one collective each, then one that is
closed.

Usage: mpiexec -n K python -m mpi4py dropped.py COUNT
"""
import sys

import numpy as np

import dpcore
from checks import Checker

count = int(sys.argv[1])
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
comm = None
for k in range(count):
    comm = dpcore.init()
    if k % 50 == 0:
        check.equal(comm.all_reduce(np.ones(3, np.int32)), np.full(3, size, np.int32),
                    f"communicator {k}")
with dpcore.init() as comm:
    check.equal(comm.all_reduce(np.ones(3, np.int32)), np.full(3, size, np.int32), "the last")
check.finish()
