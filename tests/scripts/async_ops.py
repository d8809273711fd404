"""async_op=True: several collectives in flight, waited for in reverse order; results correct,
done() after wait(), completion in issue order, and a blocking call queued behind them.

Usage: mpiexec -n K python -m mpi4py async_ops.py
"""
import gc

import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, make_input, mpi_allgatherv, mpi_bcast, reference

world = MPI.COMM_WORLD
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
f32, i64 = np.dtype(np.float32), np.dtype(np.int64)


def everyone(dtype, op, count):
    return [make_input(dtype, op, count, r, size) for r in range(size)]


for round_ in range(3):
    # A mix of collectives, sizes and algorithms, all in flight at once.
    big, small = 100_003, 13
    ar_big = everyone(f32, "sum", big)
    ar_small = everyone(i64, "max", small)
    rs_in = everyone(f32, "prod", big)
    ag_in = make_input(i64, "sum", rank + 3, rank, size)
    bc_root = round_ % size
    bc = make_input(f32, "sum", big, bc_root, size) if rank == bc_root else np.zeros(big, f32)
    bc_want = mpi_bcast(world, bc, bc_root)
    ip = ar_big[rank].copy()

    works = [
        ("all_reduce ring", comm.all_reduce(ar_big[rank], async_op=True, algo="ring"),
         reference("sum", ar_big)),
        ("all_reduce one_shot max", comm.all_reduce(ar_small[rank], op="max", async_op=True,
                                                    algo="one_shot"),
         reference("max", ar_small)),
        ("reduce_scatter prod", comm.reduce_scatter(rs_in[rank], op="prod", async_op=True),
         reference("prod", rs_in)[slice(*dpcore.shard_range(big, size, rank))]),
        ("all_gather", comm.all_gather(ag_in, async_op=True), mpi_allgatherv(world, ag_in)),
        ("broadcast", comm.broadcast(bc, root=bc_root, async_op=True), bc_want),
        ("all_reduce in place", comm.all_reduce(ip, out=ip, async_op=True),
         reference("sum", ar_big)),
        # input dropped by the caller: the Work keeps it alive
        ("all_reduce of a temporary", comm.all_reduce(ar_big[rank].copy(), async_op=True),
         reference("sum", ar_big)),
    ]
    gc.collect()
    for i in reversed(range(len(works))):
        name, work, want = works[i]
        got = work.wait()
        check.true(work.done(), f"{name}: done() after wait()")
        # completion follows issue order: everything issued earlier is done too
        earlier = [n for n, w, _ in works[:i] if not w.done()]
        check.true(not earlier, f"{name} finished before earlier collectives {earlier}")
        check.equal(got, want, f"async {name}, round {round_}")
    check.true(works[5][1].wait() is ip, "async all_reduce(out=x) returns x")
    check.true(works[4][1].wait() is bc, "async broadcast returns x")

    # A blocking call issued behind async calls on the same buffer sees their result.
    x = ar_big[rank].copy()
    w1 = comm.all_reduce(x, out=x, async_op=True)
    w2 = comm.all_reduce(x, out=x, op="max", async_op=True)
    y = comm.all_reduce(x)  # blocking: runs after w1 and w2
    check.true(w1.done() and w2.done(), "a blocking call returns after the queued async ones")
    want = reference("sum", ar_big)
    check.equal(x, want, "in-place sum then max of identical buffers")
    check.equal(y, (want.astype(np.float64) * size).astype(f32), "blocking after async")

# Many small async collectives, waited for newest first.
inputs = [everyone(i64, "sum", k) for k in range(40)]
works = [comm.all_reduce(inp[rank], async_op=True) for inp in inputs]
results = [w.wait(timeout=60) for w in reversed(works)][::-1]
for k, (got, inp) in enumerate(zip(results, inputs)):
    check.equal(got, reference("sum", inp), f"async all_reduce #{k} of 40 (count {k})")

comm.close()
check.finish()
