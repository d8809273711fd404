"""all_gather, broadcast and barrier against MPI's Allgatherv and Bcast, exactly: every dtype,
both algorithms, uneven and empty shards (with and without out=), in place, every root. On any
transport (DPCORE_TRANSPORT, DPCORE_NODE_SIZE).

Usage: mpiexec -n K python -m mpi4py gather_broadcast.py [MAX_COUNT [few]]
  MAX_COUNT skips larger counts; few: a sample of the dtypes (checks.FEW_DTYPES)
"""
import sys
import time

import numpy as np
from mpi4py import MPI

import dpcore
from checks import (Checker, DTYPES, FEW_DTYPES, capped, expect_transport, make_input,
                    mpi_allgatherv, mpi_bcast, shard_sizes)

dtypes = FEW_DTYPES if len(sys.argv) > 2 and sys.argv[2] == "few" else DTYPES
world = MPI.COMM_WORLD
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
expect_transport(comm, check)


# all_gather: the concatenation of every rank's shard, in rank order.
for dtype in dtypes:
    segment = (64 << 10) // dtype.itemsize
    for total in capped([0, 1, 7, 1009, 2 * size * segment + 3]):
        for pattern, sizes in shard_sizes(total, size):
            mine = make_input(dtype, "sum", sizes[rank], rank, size)
            want = mpi_allgatherv(world, mine)
            for algo in ["auto", "ring"] + (["one_shot"] if want.nbytes <= (256 << 10) else []) + (
                    ["direct"] if comm.direct else []):
                label = f"{dtype} total={total} shards={pattern} {sizes} algo={algo}"
                check.equal(comm.all_gather(mine, algo=algo), want, f"all_gather {label}")
                out = np.full(want.size, 99, dtype)
                check.true(comm.all_gather(mine, out=out, algo=algo) is out,
                           f"all_gather(out=) returns out, {label}")
                check.equal(out, want, f"all_gather out= {label}")
                # in place: the shard is this rank's own slice of out
                out = np.full(want.size, 99, dtype)
                offset = sum(sizes[:rank])
                out[offset:offset + sizes[rank]] = mine
                comm.all_gather(out[offset:offset + sizes[rank]], out=out, algo=algo)
                check.equal(out, want, f"all_gather from its own slice of out, {label}")

# broadcast: in place from every root; other ranks start with garbage.
for dtype in dtypes:
    segment = (64 << 10) // dtype.itemsize
    for count in capped([0, 1, 7, 1009, 3 * segment + 11]):
        for root in range(size):
            data = make_input(dtype, "sum", count, root, size)
            for algo in ["auto", "ring"] + (["one_shot"] if data.nbytes <= (256 << 10) else []) + (
                    ["direct"] if comm.direct else []):
                label = f"{dtype} count={count} root={root} algo={algo}"
                x = data.copy() if rank == root else np.full(count, 99, dtype)
                want = mpi_bcast(world, x, root)
                check.true(comm.broadcast(x, root=root, algo=algo) is x,
                           f"broadcast returns x, {label}")
                check.equal(x, want, f"broadcast {label}")
# N-D and numpy-integer roots
for root in range(size):
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) * (rank + 1)
    want = mpi_bcast(world, x, root)
    comm.broadcast(x, root=np.int64(root))
    check.equal(x, want, f"broadcast of a 2x3x4 array from root={root} (numpy int)")

# The dtypes dpcore moves but does not reduce (bool, int16, uint16, complex64): any bits arrive
# as they are (int16's include float16's NaNs), in every algorithm; a reduction of them is
# refused on the rank that asks.
# Every dtype's bytes move alike on every transport: the whole set of cases (shared memory) only.
MOVED_ONLY = ([np.dtype(t) for t in ("bool", "int16", "uint16", "complex64")]
              if dtypes is DTYPES else [])
rng = np.random.default_rng(rank)
for dtype in MOVED_ONLY:
    segment = (64 << 10) // dtype.itemsize
    for count in capped([1, 1009, 2 * size * segment + 3]):
        bits = rng.integers(0, 256, count * dtype.itemsize, np.uint8)
        mine = (bits % 2 if dtype.kind == "b" else bits).view(dtype)
        for algo in ["auto", "ring"] + (["direct"] if comm.direct else []):
            label = f"{dtype} count={count} algo={algo}"
            check.equal(comm.all_gather(mine, algo=algo).view(np.uint8),
                        mpi_allgatherv(world, mine).view(np.uint8), f"all_gather {label}")
            x = mine.copy()
            comm.broadcast(x, root=size - 1, algo=algo)
            check.equal(x.view(np.uint8), mpi_bcast(world, mine, size - 1).view(np.uint8),
                        f"broadcast {label}")
    try:
        comm.all_reduce(np.ones(3, dtype))
        check.true(False, f"all_reduce of {dtype}: no TypeError")
    except TypeError as e:
        check.true("moved" in str(e) and "not reduced" in str(e), f"all_reduce of {dtype}: {e}")

# barrier: nobody leaves before the last rank has arrived.
for _ in range(3):
    time.sleep(0.05 * rank)
    arrived = time.time()
    comm.barrier()
    left = time.time()
    latest_arrival = world.allreduce(arrived, op=MPI.MAX)
    check.true(left >= latest_arrival,
               f"barrier: rank {rank} left at {left} before the last arrival {latest_arrival}")

comm.close()
check.finish()
