"""all_reduce, reduce_scatter and reduce against MPI / NumPy, exactly: every dtype x op x
algorithm over counts that are empty, tiny, prime, not divisible by the rank count, and several
ring segments long; in place; reduce to every root, blocking and async; N-D input; and
all_gather(reduce_scatter(x)) == all_reduce(x).ravel(). On any transport (DPCORE_TRANSPORT,
DPCORE_NODE_SIZE).

Usage: mpiexec -n K python -m mpi4py reductions.py [MAX_COUNT [few]]
  MAX_COUNT skips larger counts; few: a sample of dtype x op pairs (checks.FEW_REDUCTIONS)
"""
import sys

import numpy as np
from mpi4py import MPI

import dpcore
from checks import (Checker, DTYPES, FEW_REDUCTIONS, WIDE_UNSIGNED, expect_transport,
                    make_input, mpi_allreduce, ops_for, reference)

max_count = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "all" else None
few = len(sys.argv) > 2 and sys.argv[2] == "few"
CASES = FEW_REDUCTIONS if few else [(dtype, op) for dtype in DTYPES for op in ops_for(dtype)]
world = MPI.COMM_WORLD
if world.size == 2 and not few:
    CASES += [(dtype, op) for dtype in WIDE_UNSIGNED for op in ops_for(dtype)]
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
expect_transport(comm, check)
check.true((rank, size) == (world.rank, world.size), "rank and size match MPI.COMM_WORLD")
check.true({"one_shot", "ring"} <= set(comm.algorithms), f"algorithms {comm.algorithms}")


def counts_for(dtype):
    """Small and odd counts, plus a count spanning several 64 KiB ring segments per chunk."""
    segment = (64 << 10) // dtype.itemsize
    counts = [0, 1, 2, 7, size + 1, 13 * size - 1, 1009, 100_003, 3 * size * segment + 5]
    return [c for c in counts if max_count is None or c <= max_count]


def inputs(dtype, op, count, shape=None):
    """(this rank's input, every rank's input): each rank can compute all of them."""
    everyone = [make_input(dtype, op, count, r, size, shape) for r in range(size)]
    return everyone[rank].copy(), everyone


def algos(nbytes):
    return (["auto", "ring"] + (["one_shot"] if nbytes <= (256 << 10) else [])
            + (["direct"] if comm.direct else []))


for dtype, op in CASES:
    for count in counts_for(dtype):
        x, everyone = inputs(dtype, op, count)
        want = reference(op, everyone)
        from_mpi = mpi_allreduce(world, x, op)
        if from_mpi is not None:
            check.equal(from_mpi, want, f"reference vs MPI Allreduce {dtype} {op} {count}")
        start, stop = dpcore.shard_range(count, size, rank)
        for algo in algos(x.nbytes):
            label = f"{dtype} {op} count={count} algo={algo}"
            before = x.copy()
            check.equal(comm.all_reduce(x, op=op, algo=algo), want, f"all_reduce {label}")
            check.equal(x, before, f"all_reduce leaves its input alone, {label}")
            shard = comm.reduce_scatter(x, op=op, algo=algo)
            check.equal(shard, want[start:stop], f"reduce_scatter {label}")
            # in place: out=x, and reduce_scatter into this rank's own slice of x
            y = x.copy()
            check.true(comm.all_reduce(y, op=op, out=y, algo=algo) is y,
                       f"all_reduce(out=x) returns x, {label}")
            check.equal(y, want, f"all_reduce in place {label}")
            y = x.copy()
            comm.reduce_scatter(y, op=op, out=y[start:stop], algo=algo)
            check.equal(y[start:stop], want[start:stop],
                        f"reduce_scatter into its own slice of x, {label}")



def check_reduce(x, want, root, label, **kwargs):
    """reduce to root, out of place, into out=, in place and async: want on the root, None
    elsewhere, x left alone but where it is the root's out."""
    before = x.copy()
    mine = rank == root
    check_result(comm.reduce(x, root=root, **kwargs), want, mine, f"reduce {label}")
    check.equal(x, before, f"reduce leaves its input alone, {label}")
    out = np.empty_like(x) if mine else None
    check.true(comm.reduce(x, root=root, out=out, **kwargs) is out, f"returns out, {label}")
    if mine:
        check.equal(out, want, f"reduce out= {label}")
    y = x.copy()
    check.true(comm.reduce(y, root=root, out=y if mine else None, **kwargs) is
               (y if mine else None), f"reduce(out=x) returns x on the root, {label}")
    check.equal(y, want if mine else before, f"reduce in place {label}")
    check_result(comm.reduce(x, root=root, async_op=True, **kwargs).wait(), want, mine,
                 f"async reduce {label}")


def check_result(got, want, mine, label):
    if mine:
        check.equal(got, want, label)
    else:
        check.true(got is None, f"None off the root: {label}")


# reduce: every root on small counts, the roots in turn on the others.
turn = 0
for dtype, op in CASES:
    for count in counts_for(dtype):
        x, everyone = inputs(dtype, op, count)
        want = reference(op, everyone)
        for algo in algos(x.nbytes):
            roots = range(size) if count <= 1009 else [turn % size]
            turn += 1
            for root in roots:
                check_reduce(x, want, root, f"{dtype} {op} count={count} algo={algo} "
                             f"root={root}", op=op, algo=algo)

# The composition identity, for sum over every dtype and a few counts.
for dtype in sorted({dtype for dtype, _ in CASES}, key=str):
    for count in [c for c in counts_for(dtype) if c <= 100_003]:
        x, _ = inputs(dtype, "sum", count)
        for algo in ["one_shot", "ring"] if x.nbytes <= (256 << 10) else ["ring"]:
            gathered = comm.all_gather(comm.reduce_scatter(x, algo=algo), algo=algo)
            check.equal(gathered, comm.all_reduce(x, algo=algo).ravel(),
                        f"all_gather(reduce_scatter(x)) == all_reduce(x).ravel(), {dtype} "
                        f"count={count} algo={algo}")

# N-D input keeps its shape; reduce_scatter flattens; out= must have x's shape.
for shape in [(), (3, 5), (2, 3, 4), (0, 4), (7, 1009)]:
    for algo in ["one_shot", "ring"]:
        count = int(np.prod(shape))
        x, everyone = inputs(np.dtype(np.float32), "sum", count, shape)
        want = reference("sum", everyone)
        label = f"shape={shape} algo={algo}"
        check.equal(comm.all_reduce(x, algo=algo), want, f"all_reduce {label}")
        out = np.empty(shape, np.float32)
        check.true(comm.all_reduce(x, out=out, algo=algo) is out, f"returns out, {label}")
        check.equal(out, want, f"all_reduce out= {label}")
        start, stop = dpcore.shard_range(count, size, rank)
        check.equal(comm.reduce_scatter(x, algo=algo), want.reshape(-1)[start:stop],
                    f"reduce_scatter {label}")
        check_reduce(x, want, size - 1, label, algo=algo)

# A read-only input is fine (only out= must be writable).
x, everyone = inputs(np.dtype(np.int32), "sum", 1000)
x.flags.writeable = False
check.equal(comm.all_reduce(x), reference("sum", everyone), "all_reduce of a read-only input")

comm.close()
check.finish()
