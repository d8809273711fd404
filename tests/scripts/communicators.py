"""Several communicators at once: COMM_WORLD twice and a Split of it (ranks renumbered),
collectives interleaved, blocking and async; close() and the context manager.

Usage: mpiexec -n K python -m mpi4py communicators.py
"""
import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, make_input, mpi_allgatherv, mpi_allreduce, mpi_bcast

world_mpi = MPI.COMM_WORLD
rank, size = world_mpi.rank, world_mpi.size
# Two halves (even and odd ranks), numbered in reverse, so sub ranks differ from world ranks.
half_mpi = world_mpi.Split(color=rank % 2, key=-rank)

world = dpcore.init()
half = dpcore.init(half_mpi)
world2 = dpcore.init(MPI.COMM_WORLD)
check = Checker(rank)
check.true((half.rank, half.size) == (half_mpi.rank, half_mpi.size),
           f"split communicator: rank/size {(half.rank, half.size)} vs MPI's "
           f"{(half_mpi.rank, half_mpi.size)}")
check.true((world2.rank, world2.size) == (rank, size), "a second COMM_WORLD communicator")

f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
for i in range(4):
    count = [1, 1009, 100_003, 5][i]
    xw = make_input(f32, "sum", count, rank, size)
    xh = make_input(i32, "sum", count, half.rank, half.size) + 1000 * (rank % 2)
    # interleave: world, half, world2, half, world, ...
    check.equal(world.all_reduce(xw), mpi_allreduce(world_mpi, xw, "sum"), f"world all_reduce {i}")
    check.equal(half.all_reduce(xh, op="max"), mpi_allreduce(half_mpi, xh, "max"),
                f"half all_reduce {i}")
    root = i % size
    b = xw.copy()
    want = mpi_bcast(world_mpi, b, root)
    check.equal(world2.broadcast(b, root=root), want, f"world2 broadcast {i}")
    start, stop = dpcore.shard_range(count, half.size, half.rank)
    check.equal(half.reduce_scatter(xh), mpi_allreduce(half_mpi, xh, "sum")[start:stop],
                f"half reduce_scatter {i}")
    shard = xw[: rank + 1]
    check.equal(world.all_gather(shard), mpi_allgatherv(world_mpi, shard), f"world all_gather {i}")
    half.barrier()
    world2.barrier()

    # async on all three at once, waited for in the opposite order
    w1 = world.all_reduce(xw, async_op=True, algo="ring")
    w2 = half.all_reduce(xh, async_op=True, algo="ring")
    w3 = world2.all_reduce(xw, op="min", async_op=True)
    check.equal(w3.wait(), mpi_allreduce(world_mpi, xw, "min"), f"async world2 min {i}")
    check.equal(w2.wait(), mpi_allreduce(half_mpi, xh, "sum"), f"async half sum {i}")
    check.equal(w1.wait(), mpi_allreduce(world_mpi, xw, "sum"), f"async world sum {i}")

# close(): further calls raise ValueError; closing twice is harmless; others keep working.
world2.close()
world2.close()
try:
    world2.all_reduce(np.ones(3, f32))
    check.true(False, "all_reduce on a closed communicator raised nothing")
except ValueError:
    pass
with dpcore.init(half_mpi) as scoped:
    check.equal(scoped.all_reduce(np.full(3, rank, i32)),
                mpi_allreduce(half_mpi, np.full(3, rank, i32), "sum"), "context manager")
x = np.full(5, rank, f32)
check.equal(world.all_reduce(x), mpi_allreduce(world_mpi, x, "sum"), "world after others closed")
half.close()
world.close()
check.finish()
