"""DPCORE_TUNE=0: auto's fixed choice between the ring and direct. Rank 0 makes it from its
own buffers, and every rank runs it: direct for an all_gather on comm.alloc buffers, the ring
for ordinary 1 MiB buffers and for the other collectives below 64 MiB. A rank whose buffer
is of another kind than rank 0's runs rank 0's pick, and the results equal MPI's.

Usage: DPCORE_TUNE=0 mpiexec -n K python -m mpi4py fixed_choice.py
"""
import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, mpi_allgatherv, mpi_allreduce

world = MPI.COMM_WORLD
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
count = (1 << 20) // 4  # 1 MiB of float32: past one_shot, far below 64 MiB
start, stop = dpcore.shard_range(count, size, rank)
shared = comm.alloc(count, np.float32)
ordinary = np.zeros(count, np.float32)


def ran(call):
    """The algorithm one call ran on this rank."""
    before = comm.algorithm_calls()
    call()
    after = comm.algorithm_calls()
    return [a for a in after if after[a] != before.get(a, 0)]


# Without process_vm_readv auto runs the ring; alone, alloc gives ordinary memory.
direct = "direct" if comm.direct and size > 1 else "ring"
mine = np.arange(start, stop, dtype=np.float32) + 1000 * rank
cases = {  # name: (rank 0's buffer, the others' buffer, the algorithm every rank must run)
    "all shared": (shared, shared, direct),
    "all ordinary": (ordinary, ordinary, "ring"),
    "rank 0 shared": (shared, ordinary, direct),
    "rank 0 ordinary": (ordinary, shared, "ring"),
}
for name, (first, others, want) in cases.items():
    g = first if rank == 0 else others
    g[:] = -1
    g[start:stop] = mine
    algo = ran(lambda: comm.all_gather(g[start:stop], out=g))
    check.true(algo == [want], f"all_gather, {name}: ran {algo}, expected {want}")
    check.equal(g, mpi_allgatherv(world, mine), f"all_gather, {name}")

shared[:] = rank + 1
algo = ran(lambda: comm.all_reduce(shared, out=shared))
check.true(algo == ["ring"], f"all_reduce on shared buffers: ran {algo}, expected ring")
check.equal(shared, mpi_allreduce(world, np.full(count, rank + 1, np.float32), "sum"),
            "all_reduce on shared buffers")

comm.close()
check.finish()
