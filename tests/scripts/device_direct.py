"""Direct on CUDA arrays: buffers from comm.alloc(..., device="cuda"), which every peer maps once,
so each rank reads what it needs straight out of the peers' buffers. On the CPU emulation
(DPCORE_CUDA_EMULATION=1) or a GPU (DEVICE=cupy). Every collective against NumPy exactly and
bit for bit against the ring on the same buffers; in place; and direct on ordinary device
buffers refused on the rank that passed them, with a ValueError that says why.

Usage: mpiexec -n K python -m mpi4py device_direct.py
"""
import numpy as np

import dpcore
from checks import Checker, device_arrays, make_input, ops_for, reference, say

xp, to_host = device_arrays()

comm = dpcore.init(timeout=30)
rank, size = comm.rank, comm.size
check = Checker(rank)


def on_device(a, length=None):
    """A comm.alloc(device="cuda") buffer holding a copy of 1-D a; with length (the same on
    every rank, as alloc needs), a's part of a buffer that long."""
    buffer = comm.alloc(a.shape if length is None else length, a.dtype, device="cuda")
    if length is not None:
        buffer = buffer[:a.size]
    buffer.set(a)
    return buffer


for dtype, op in [(np.dtype("float16"), "sum"), (np.dtype("float16"), "avg"),
                  (np.dtype("float32"), "prod"), (np.dtype("int8"), "max"),
                  (np.dtype("int64"), "min")]:
    for count in (1, 7, 1009, 100_003):
        everyone = [make_input(dtype, op, count, r, size) for r in range(size)]
        want = reference(op, everyone)
        lo, hi = dpcore.shard_range(count, size, rank)
        label = f"{dtype} {op} count={count}"
        x, out = on_device(everyone[rank]), comm.alloc(count, dtype, device="cuda")
        comm.all_reduce(x, op=op, out=out, algo="direct")
        ring = comm.all_reduce(xp.asarray(everyone[rank]), op=op, algo="ring")
        check.equal(to_host(out), want, f"all_reduce {label}")
        check.equal(to_host(out).view(np.uint8), to_host(ring).view(np.uint8),
                    f"all_reduce {label}: the ring's bits")
        comm.all_reduce(x, op=op, out=x, algo="direct")
        check.equal(to_host(x), want, f"all_reduce in place {label}")
        x = on_device(everyone[rank])
        s = comm.reduce_scatter(x, op=op, algo="direct")
        check.equal(to_host(s), want[lo:hi], f"reduce_scatter {label}")
        shard = on_device(want[lo:hi], -(-count // size))  # shards differ by one at most
        g = comm.all_gather(shard, algo="direct")
        check.equal(to_host(g), want, f"all_gather {label}")
        root = count % size
        r = comm.reduce(x, root=root, op=op, algo="direct")  # x: a peer's memory, out: not
        ring = comm.reduce(xp.asarray(everyone[rank]), root=root, op=op, algo="ring")
        if rank == root:
            check.equal(to_host(r).view(np.uint8), to_host(ring).view(np.uint8),
                        f"reduce {label}: the ring's bits")
            check.equal(to_host(r), want, f"reduce {label}")
        b = on_device(everyone[rank])
        comm.broadcast(b, root=size - 1, algo="direct")
        check.equal(to_host(b), everyone[size - 1], f"broadcast {label}")

try:  # every peer maps each rank's buffer at its own size: they must agree
    comm.alloc(10 + rank, np.float32, device="cuda")
    check.true(False, "buffers of different sizes did not raise")
except ValueError as e:
    check.true("every rank must ask for the same buffer" in str(e), f"the refusal: {e}")

plain = xp.asarray(np.ones(10, np.float32))
try:
    comm.all_reduce(plain, algo="direct")
    check.true(False, "direct on an ordinary device buffer did not raise")
except ValueError as e:
    check.true("comm.alloc" in str(e), f"the refusal says why: {e}")
check.equal(to_host(comm.all_reduce(plain)), np.full(10, size, np.float32), "usable after it")
calls = comm.algorithm_calls()
check.true(calls.get("direct", 0) > 0, f"direct ran: {calls}")
say(rank, f"device {comm.device}")
comm.close()
check.finish()
