"""The ring and the direct algorithm give the same bits, so algo="auto" may pick either call by
call: on random (inexact) floating-point data, where any other order of the additions would
round differently, for every floating dtype and op, all_reduce, reduce_scatter and reduce.
Also: auto runs both (its tuner starts on the ring below 64 MiB and tries direct after 5 calls,
for 2 calls at least) and stays correct while it switches.

Usage: mpiexec -n K python -m mpi4py same_bits.py   (needs comm.direct)
"""
import numpy as np

import dpcore
from checks import BFLOAT16, Checker

comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
check.true(comm.direct, "the ranks may read each other's memory")
rng = np.random.default_rng(1234 + rank)
floats = [np.dtype(t) for t in ("float16", "float32", "float64")] + \
    ([BFLOAT16] if BFLOAT16 is not None else [])
for dtype in floats:
    for op in ("sum", "prod", "max", "min", "avg"):
        for count in (1, 1009, 300_007):  # one element, one piece, several 128 KiB pieces
            x = rng.uniform(0.5, 1.5, count).astype(dtype)  # prod stays in range
            ring = comm.all_reduce(x, op=op, algo="ring")
            label = f"{dtype} {op} count={count}"
            check.equal(comm.all_reduce(x, op=op, algo="direct"), ring, f"all_reduce {label}")
            check.equal(comm.reduce_scatter(x, op=op, algo="direct"),
                        comm.reduce_scatter(x, op=op, algo="ring"), f"reduce_scatter {label}")
            root = count % size
            direct = comm.reduce(x, root=root, op=op, algo="direct")
            ring = comm.reduce(x, root=root, op=op, algo="ring")
            if rank == root:
                check.equal(direct, ring, f"reduce {label}")

# auto, past one_shot's sizes: the tuner's first run and its trial, every result equal to the
# ring's
x = rng.uniform(0.5, 1.5, 1 << 20).astype(np.float32)
want = comm.all_reduce(x, algo="ring")
before = comm.algorithm_calls()
for i in range(12):
    check.equal(comm.all_reduce(x), want, f"auto all_reduce, call {i}")
ran = {a: k - before.get(a, 0) for a, k in comm.algorithm_calls().items()}
check.true(ran.get("ring", 0) >= 5 and ran.get("direct", 0) >= 2, f"auto ran {ran}")

comm.close()
check.finish()
