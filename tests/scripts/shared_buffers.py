"""comm.alloc's buffers, which direct reads with a plain copy through the peers' mappings (and
through which a gather's senders write the root's output): every collective on them equals
MPI's, exactly, under every algorithm; a rank may mix them with ordinary arrays, and may free
its buffer while a peer still uses its own (the reads then fall back to the kernel copy). Each
rank's buffer is its own: nothing one rank writes shows in a peer's. A rank that cannot create
its segment, or cannot map a peer's, makes alloc raise on every rank, and the communicator works
on.

Usage: mpiexec -n K python -m mpi4py shared_buffers.py
"""
import gc
import resource

import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, make_input, mpi_allgatherv, mpi_allreduce, mpi_bcast, reference

world = MPI.COMM_WORLD
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
algos = ["auto", "ring"] + (["direct"] if comm.direct else [])


def shared_copy(a):
    """a, copied into a fresh comm.alloc buffer (collective)."""
    b = comm.alloc(a.shape, a.dtype)
    b[...] = a
    return b


# A buffer is zero-filled, writable, and this rank's own.
b = comm.alloc((3, 5), np.int32)
check.true(b.shape == (3, 5) and b.dtype == np.int32 and not b.any(), "alloc: zeros (3, 5)")
b[...] = rank + 1
world.Barrier()
check.true((b == rank + 1).all(), "alloc: a peer's writes do not show in this rank's buffer")
del b

for dtype in map(np.dtype, ("float32", "int64", "float16")):
    for count in (1, 7, 1009, 300_001):
        x = make_input(dtype, "sum", count, rank, size)
        inputs = [make_input(dtype, "sum", count, r, size) for r in range(size)]
        want = reference("sum", inputs)
        mpi_want = mpi_allreduce(world, x, "sum")
        check.true(mpi_want is None or (mpi_want == want).all(), f"MPI agrees, {dtype} {count}")
        start, stop = dpcore.shard_range(count, size, rank)
        for algo in algos:
            label = f"{dtype} count={count} algo={algo}"
            y = shared_copy(x)
            comm.all_reduce(y, out=y, algo=algo)
            check.equal(y, want, f"all_reduce in place, {label}")
            out = comm.alloc(count, dtype)
            comm.all_reduce(shared_copy(x), out=out, algo=algo)
            check.equal(out, want, f"all_reduce into a shared out, {label}")
            # every rank allocates the same: the longest shard, of which it uses its own part
            shard = comm.alloc(-(-count // size), dtype)[:stop - start]
            comm.reduce_scatter(shared_copy(x), out=shard, algo=algo)
            check.equal(shard, want[start:stop], f"reduce_scatter, {label}")
            g = comm.alloc(count, dtype)
            g[start:stop] = x[start:stop]
            comm.all_gather(g[start:stop], out=g, algo=algo)
            check.equal(g, mpi_allgatherv(world, x[start:stop]), f"all_gather in place, {label}")
            for root in range(size):
                c = shared_copy(x)
                want_b = mpi_bcast(world, x, root)
                comm.broadcast(c, root=root, algo=algo)
                check.equal(c, want_b, f"broadcast root={root}, {label}")
        gathered = mpi_allgatherv(world, x[start:stop])
        for algo in ["auto"] + (["direct"] if comm.direct else []):
            for root in range(size):
                whole = comm.alloc(count, dtype)
                comm.gather(x[start:stop], root=root, out=whole if rank == root else None,
                            algo=algo)
                if rank == root:
                    check.equal(whole, gathered, f"gather into a shared out, root={root}, "
                                f"{dtype} count={count} algo={algo}")

# Mixed: rank 0 passes ordinary arrays, the others shared ones.
count = 100_003
x = make_input(np.dtype("float32"), "sum", count, rank, size)
want = reference("sum", [make_input(np.dtype("float32"), "sum", count, r, size)
                         for r in range(size)])
for algo in algos:
    y = shared_copy(x)
    if rank == 0:
        y = x.copy()
    comm.all_reduce(y, out=y, algo=algo)
    check.equal(y, want, f"all_reduce, rank 0 on ordinary memory, algo={algo}")

# Outputs from _C.stream_min_bytes up: direct writes them with streaming stores, which need
# their own handling of a destination that is not 64-byte aligned and of the tail; an odd count
# puts every peer's shard at an odd offset.
count = dpcore._C.stream_min_bytes() // 4 + 1001
x = make_input(np.dtype("float32"), "sum", count, rank, size)
start, stop = dpcore.shard_range(count, size, rank)
gathered = mpi_allgatherv(world, x[start:stop])
for algo in algos:
    label = f"{count} elements, past stream_min_bytes, algo={algo}"
    g = comm.alloc(count, np.float32)
    g[start:stop] = x[start:stop]
    comm.all_gather(g[start:stop], out=g, algo=algo)
    check.equal(g, gathered, f"all_gather in place, {label}")
    g = comm.alloc(count, np.float32)
    shard = comm.alloc(-(-count // size), np.float32)[:stop - start]  # the same on every rank
    shard[...] = x[start:stop]
    comm.all_gather(shard, out=g, algo=algo)
    check.equal(g, gathered, f"all_gather out of place, {label}")
    c = shared_copy(x)
    comm.broadcast(c, root=size - 1, algo=algo)
    check.equal(c, mpi_bcast(world, x, size - 1), f"broadcast, {label}")
    if algo != "ring":  # which runs no gather
        g = comm.alloc(count, np.float32)
        comm.gather(x[start:stop], root=size - 1, out=g if rank == size - 1 else None, algo=algo)
        if rank == size - 1:
            check.equal(g, gathered, f"gather into a shared out, {label}")
    y = shared_copy(x)
    comm.all_reduce(y, out=y, algo=algo)
    check.equal(y, mpi_allreduce(world, x, "sum"), f"all_reduce in place, {label}")

# Freed on one rank: rank 1 drops its buffer of an allocation the others keep using, then
# gathers into ordinary memory; the others' reads of rank 1 and rank 1's reads of them must
# not go through the mapping rank 1 has let go.
g = comm.alloc(count, np.float32)
start, stop = dpcore.shard_range(count, size, rank)
if rank == 1:
    del g
    gc.collect()
    g = np.zeros(count, np.float32)
g[start:stop] = x[start:stop]
for algo in algos:
    comm.all_gather(g[start:stop], out=g, algo=algo)
    check.equal(g, mpi_allgatherv(world, x[start:stop]), f"all_gather after rank 1 freed its "
                f"buffer, algo={algo}")

# Every rank must ask for the same buffer: a mismatch is a ValueError on every rank.
try:
    comm.alloc(10 + rank, np.float32)
    check.true(size == 1, "alloc of different sizes raises")
except ValueError as e:
    check.true(size > 1 and "same buffer" in str(e), f"alloc mismatch message: {e}")


def address_space():
    """This process's mapped bytes, as RLIMIT_AS counts them."""
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    return kib << 10


# The last rank fails one step of alloc: its own segment (room for half of it) or its mapping
# of a peer's (room for one and a half). An address-space limit makes the mmap fail, as a full
# machine would; the other ranks' steps succeed, and every rank must still raise.
nbytes = 256 << 20
for step, room in (("create shared memory", nbytes // 2),
                   ("map the peers' buffers", nbytes * 3 // 2)):
    if size == 1:
        break  # alloc maps nothing alone
    limits = resource.getrlimit(resource.RLIMIT_AS)
    if rank == size - 1:
        resource.setrlimit(resource.RLIMIT_AS, (address_space() + room, limits[1]))
    try:
        comm.alloc(nbytes // 4, np.float32)
        check.true(False, f"alloc raises where rank {size - 1} cannot {step}")
    except RuntimeError as e:
        check.true(f"cannot {step}: rank {size - 1}: " in str(e) and
                   "cannot map" in str(e), f"alloc failure message: {e}")
    finally:
        resource.setrlimit(resource.RLIMIT_AS, limits)
    check.equal(comm.all_reduce(np.ones(5, np.float32)), np.full(5, size, np.float32),
                f"all_reduce after alloc failed to {step}")
    after = comm.alloc(1000, np.float32)
    after[:] = rank
    g = comm.all_gather(after[:1].copy())
    check.equal(g, np.arange(size, dtype=np.float32), f"alloc works after failing to {step}")

comm.close()
check.finish()
