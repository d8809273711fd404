"""The between-node transports (run with DPCORE_TRANSPORT=mpi or DPCORE_NODE_SIZE=k) against
mpi4py's own collectives, exactly: a few dtypes x ops (avg and float16 included), counts 0, 1, 7
and 100003 (uneven shards at every rank count), both algorithms, in place, uneven all_gather
shards, every broadcast root, async calls completing in issue order.

Usage: mpiexec -n K python -m mpi4py transport_collectives.py TRANSPORT PATH
  TRANSPORT: the comm.transport expected ("mpi", "shm+mpi", "shm")
  PATH: "hierarchical" when all_reduce must go through the node's shared memory, else "flat"
"""
import sys

import numpy as np
from mpi4py import MPI

import dpcore
from checks import (BFLOAT16, Checker, make_input, mpi_allgatherv, mpi_allreduce, mpi_bcast,
                    reference, say)

want_transport, want_path = sys.argv[1], sys.argv[2]
world = MPI.COMM_WORLD
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
check.true(comm.transport == want_transport,
           f"transport {comm.transport!r}, expected {want_transport!r}")
node_shm = getattr(comm._backend, "_node_shm", None)  # HierarchicalTransport only
hierarchical = node_shm is not None and getattr(comm._backend, "_cross", None) is not None
check.true(hierarchical == (want_path == "hierarchical"),
           f"all_reduce path {'hierarchical' if hierarchical else 'flat'}, expected {want_path}")

f16, f32, i64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int64)
CASES = [(f16, "sum"), (f16, "avg"), (f16, "max"), (f32, "sum"), (f32, "prod"), (f32, "avg"),
         (np.dtype(np.float64), "min"), (np.dtype(np.int8), "sum"), (np.dtype(np.int32), "prod"),
         (i64, "max")]
if BFLOAT16 is not None:
    CASES.append((BFLOAT16, "sum"))
COUNTS = [0, 1, 7, 100_003]


def algos(nbytes):
    return ["auto", "ring"] + (["one_shot"] if nbytes <= (256 << 10) else [])


def expected(op, x, everyone):
    """mpi4py's Allreduce where MPI can reduce the dtype and op, checked against NumPy's exact
    reduction; NumPy's alone for float16, bfloat16 and avg."""
    want = reference(op, everyone)
    from_mpi = mpi_allreduce(world, x, op)
    if from_mpi is not None:
        check.equal(from_mpi, want, f"NumPy reference vs MPI Allreduce {x.dtype} {op}")
        return from_mpi
    return want


# all_reduce and reduce_scatter
for dtype, op in CASES:
    for count in COUNTS:
        everyone = [make_input(dtype, op, count, r, size) for r in range(size)]
        x = everyone[rank].copy()
        want = expected(op, x, everyone)
        start, stop = dpcore.shard_range(count, size, rank)
        for algo in algos(x.nbytes):
            label = f"{dtype} {op} count={count} algo={algo}"
            shm_seq = node_shm.sequence if hierarchical else 0
            check.equal(comm.all_reduce(x, op=op, algo=algo), want, f"all_reduce {label}")
            if hierarchical:
                check.true(node_shm.sequence == shm_seq + 2,
                           f"all_reduce {label} did not go through the node's shared memory")
            check.equal(x, everyone[rank], f"all_reduce leaves its input alone, {label}")
            y = x.copy()
            check.true(comm.all_reduce(y, op=op, out=y, algo=algo) is y,
                       f"all_reduce(out=x) returns x, {label}")
            check.equal(y, want, f"all_reduce in place {label}")
            check.equal(comm.reduce_scatter(x, op=op, algo=algo), want[start:stop],
                        f"reduce_scatter {label}")
            y = x.copy()
            comm.reduce_scatter(y, op=op, out=y[start:stop], algo=algo)
            check.equal(y[start:stop], want[start:stop],
                        f"reduce_scatter into its own slice of x, {label}")

# N-D all_reduce keeps the shape
x = make_input(f32, "sum", 3 * 1009, rank, size, (3, 1009))
check.equal(comm.all_reduce(x), mpi_allreduce(world, x, "sum"), "all_reduce of a 3x1009 array")

# all_gather: uneven shards (rank r holds r+c elements, or shard_range's split), with and
# without out=, and in place from this rank's own slice of out
for dtype in [f16, f32, i64] + ([BFLOAT16] if BFLOAT16 is not None else []):
    for total in COUNTS:
        patterns = {"shard_range": [b - a for a, b in (dpcore.shard_range(total, size, r)
                                                       for r in range(size))],
                    "rank+c": [r + min(total, 3) for r in range(size)]}
        for pattern, sizes in patterns.items():
            mine = make_input(dtype, "sum", sizes[rank], rank, size)
            want = mpi_allgatherv(world, mine)
            for algo in algos(want.nbytes):
                label = f"{dtype} total={total} shards={pattern} algo={algo}"
                check.equal(comm.all_gather(mine, algo=algo), want, f"all_gather {label}")
                out = np.full(want.size, 99, dtype)
                check.true(comm.all_gather(mine, out=out, algo=algo) is out,
                           f"all_gather(out=) returns out, {label}")
                check.equal(out, want, f"all_gather out= {label}")
                out = np.full(want.size, 99, dtype)
                offset = sum(sizes[:rank])
                out[offset:offset + sizes[rank]] = mine
                comm.all_gather(out[offset:offset + sizes[rank]], out=out, algo=algo)
                check.equal(out, want, f"all_gather from its own slice of out, {label}")

# broadcast from every root; the others start with garbage
for dtype in [f16, f32, i64]:
    for count in COUNTS + [300_007]:  # 300007 float32/int64: several chain segments
        for root in range(size):
            data = make_input(dtype, "sum", count, root, size)
            want = mpi_bcast(world, data, root)
            for algo in algos(data.nbytes):
                x = data.copy() if rank == root else np.full(count, 99, dtype)
                check.true(comm.broadcast(x, root=root, algo=algo) is x,
                           f"broadcast returns x, {dtype} count={count} root={root}")
                check.equal(x, want, f"broadcast {dtype} count={count} root={root} algo={algo}")
comm.barrier()

# async: a mix in flight, waited for newest first; completion follows issue order
big = 100_003
ar = [make_input(f32, "sum", big, r, size) for r in range(size)]
rs = [make_input(i64, "max", big, r, size) for r in range(size)]
shard = make_input(f16, "sum", rank + 2, rank, size)
root = size - 1
bc = make_input(f32, "sum", 1009, root, size) if rank == root else np.zeros(1009, f32)
bc_want = mpi_bcast(world, bc, root)
ip = ar[rank].copy()
start, stop = dpcore.shard_range(big, size, rank)
works = [
    ("all_reduce ring", comm.all_reduce(ar[rank], async_op=True, algo="ring"),
     reference("sum", ar)),
    ("reduce_scatter max", comm.reduce_scatter(rs[rank], op="max", async_op=True),
     reference("max", rs)[start:stop]),
    ("all_gather", comm.all_gather(shard, async_op=True), mpi_allgatherv(world, shard)),
    ("broadcast", comm.broadcast(bc, root=root, async_op=True), bc_want),
    ("all_reduce in place", comm.all_reduce(ip, out=ip, async_op=True), reference("sum", ar)),
    ("all_reduce small", comm.all_reduce(ar[rank][:7], op="min", async_op=True),
     reference("min", [a[:7] for a in ar])),
]
for i in reversed(range(len(works))):
    name, work, want = works[i]
    got = work.wait(timeout=60)
    check.true(work.done(), f"async {name}: done() after wait()")
    earlier = [n for n, w, _ in works[:i] if not w.done()]
    check.true(not earlier, f"async {name} finished before earlier collectives {earlier}")
    check.equal(got, want, f"async {name}")
# a blocking call queued behind async ones on the same buffer sees their results
x = ar[rank].copy()
w1 = comm.all_reduce(x, out=x, async_op=True)
w2 = comm.all_reduce(x, out=x, op="max", async_op=True)
y = comm.all_reduce(x)
check.true(w1.done() and w2.done(), "a blocking call returns after the queued async ones")
check.equal(y, (reference("sum", ar).astype(np.float64) * size).astype(f32),
            "blocking all_reduce after async sum then max")

comm.close()
say(rank, f"transport {want_transport} path {want_path}")
check.finish()
