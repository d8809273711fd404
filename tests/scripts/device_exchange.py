"""gather, scatter and all_to_all on CUDA arrays (the CPU emulation with DPCORE_CUDA_EMULATION=1,
or a GPU with DEVICE=cupy), against NumPy exactly: one_shot and auto on ordinary device buffers,
direct and auto on comm.alloc(device="cuda") buffers (which the peers read where they lie),
uneven and empty shards and splits, async; and past one_shot on ordinary buffers, a ValueError
on the rank that passed them.

Usage: mpiexec -n K python -m mpi4py device_exchange.py
"""
import numpy as np

import dpcore
from checks import Checker, device_arrays, make_input

xp, to_host = device_arrays()

comm = dpcore.init(timeout=30)
rank, size = comm.rank, comm.size
check = Checker(rank)


def on_device(a, shared, length):
    """a (1-D) on the device: in a comm.alloc buffer `length` long (the same on every rank, as
    alloc needs), or an ordinary one."""
    if not shared:
        return xp.asarray(a)
    buffer = comm.alloc(max(length, 1), a.dtype, device="cuda")[:a.size]
    buffer.set(a)
    return buffer


def host(d):
    return None if d is None else to_host(d)


CASES = [(False, "one_shot", (1, 7, 1009)), (False, "auto", (0, 1009, 30_000)),
         (True, "direct", (1, 7, 100_003)), (True, "auto", (1009, 100_003))]
for dtype in (np.dtype("float16"), np.dtype("int64")):
    for shared, algo, counts in CASES:
        for count in counts:
            label = f"{dtype} count={count} algo={algo} shared={shared}"
            sizes = [count // size + r for r in range(size)]  # uneven
            shards = [make_input(dtype, "sum", sizes[r], r, size) for r in range(size)]
            whole = np.concatenate(shards)
            longest = max(sizes)
            for root in range(size):
                got = comm.gather(on_device(shards[rank], shared, longest), root=root,
                                  algo=algo)
                if rank == root:
                    check.equal(host(got), whole, f"gather root={root} {label}")
                else:
                    check.true(got is None, f"gather off the root, {label}")
                out = on_device(np.full(sizes[rank], 99, dtype), shared, longest)
                x = on_device(whole, shared, whole.size) if rank == root else None
                if shared and rank != root:
                    comm.alloc(max(whole.size, 1), dtype, device="cuda")  # as the root's x
                comm.scatter(x, out, root=root, algo=algo)
                check.equal(host(out), shards[rank], f"scatter root={root} {label}")
            m = [[(p + 2 * q + count) % 7 + count // (size * size) for q in range(size)]
                 for p in range(size)]
            xs = [make_input(dtype, "sum", sum(m[p]), p, size) for p in range(size)]
            starts = [np.cumsum([0] + m[p]) for p in range(size)]
            want = np.concatenate([xs[p][starts[p][rank]:starts[p][rank + 1]]
                                   for p in range(size)])
            x = on_device(xs[rank], shared, max(v.size for v in xs))
            work = comm.all_to_all(x, splits=m[rank], algo=algo, async_op=True)
            check.equal(host(work.wait()), want, f"all_to_all splits {label}")
            each = count // size
            even = on_device(np.tile(np.arange(each, dtype=dtype) + rank, size), shared,
                             each * size)
            want = np.concatenate([np.arange(each, dtype=dtype) + p for p in range(size)])
            check.equal(host(comm.all_to_all(even, algo=algo)), want, f"all_to_all {label}")

# Past one_shot on ordinary device buffers: direct cannot read them, refused where passed.
big = xp.asarray(np.zeros((comm.one_shot_bytes // 4 + 4) * size, np.float32))
try:
    comm.all_to_all(big, algo="auto")
    check.true(False, "a big all_to_all on ordinary device buffers is refused")
except ValueError as e:
    check.true("comm.alloc" in str(e), f"the refusal says what to do: {e}")

check.finish()
comm.close()
