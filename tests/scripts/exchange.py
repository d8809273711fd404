"""gather, scatter and all_to_all against NumPy, exactly: every dtype, every root, every
algorithm that runs here, even, uneven and empty shards and splits, out= given or not, gather in
place, scatter from a list, N-D input, async. Every rank makes every rank's input (make_input),
so each knows the whole expected result. On any transport (DPCORE_TRANSPORT, DPCORE_NODE_SIZE).

Usage: mpiexec -n K python -m mpi4py exchange.py [MAX_COUNT [few]]
  MAX_COUNT skips larger counts; few: a sample of the dtypes (checks.FEW_DTYPES)
"""
import sys

import numpy as np

import dpcore
from checks import (Checker, DTYPES, FEW_DTYPES, capped, expect_transport, make_input,
                    shard_sizes)

dtypes = FEW_DTYPES if len(sys.argv) > 2 and sys.argv[2] == "few" else DTYPES
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
expect_transport(comm, check)


def algos(largest):
    """The algorithms every rank can run when the largest rank's input has `largest` bytes
    (direct: by messages, peer reads, or without peer reads in rounds through the segment)."""
    return ["auto", "direct"] + (["one_shot"] if largest <= comm.one_shot_bytes else [])


for dtype in dtypes:
    segment = (64 << 10) // dtype.itemsize
    for total in capped([0, 1, 7, 1009, 2 * size * segment + 3]):
        for pattern, sizes in shard_sizes(total, size):
            shards = [make_input(dtype, "sum", sizes[r], r, size) for r in range(size)]
            whole = np.concatenate(shards)
            for root in range(size):
                for algo in algos(max(sizes) * dtype.itemsize):
                    label = f"{dtype} shards={pattern} {sizes} root={root} algo={algo}"
                    got = comm.gather(shards[rank], root=root, algo=algo)
                    if rank == root:
                        check.equal(got, whole, f"gather {label}")
                        out = np.full(whole.size, 99, dtype)
                        check.true(comm.gather(shards[rank], root=root, out=out, algo=algo)
                                   is out, f"gather(out=) returns out, {label}")
                        check.equal(out, whole, f"gather out= {label}")
                        out = np.full(whole.size, 99, dtype)  # in place: its own slice
                        at = sum(sizes[:rank])
                        out[at:at + sizes[rank]] = shards[rank]
                        comm.gather(out[at:at + sizes[rank]], root=root, out=out, algo=algo)
                        check.equal(out, whole, f"gather in place {label}")
                    else:
                        check.true(got is None, f"gather returns None off the root, {label}")
                        comm.gather(shards[rank], root=root, algo=algo)
                        comm.gather(shards[rank], root=root, algo=algo)
                for algo in algos(whole.nbytes):
                    label = f"{dtype} shards={pattern} {sizes} root={root} algo={algo}"
                    out = np.full(sizes[rank], 99, dtype)
                    x = whole.copy() if rank == root else None
                    check.true(comm.scatter(x, out, root=root, algo=algo) is out,
                               f"scatter returns out, {label}")
                    check.equal(out, shards[rank], f"scatter {label}")
        # x as a list, one array per rank, each taken where it lies (the root's pieces)
        piece = -(-total // size)
        pieces = [make_input(dtype, "sum", piece, q, size) for q in range(size)]
        for root in range(size):
            for algo in algos(piece * size * dtype.itemsize):
                out = np.full(piece, 99, dtype)
                work = comm.scatter(pieces if rank == root else None, out, root=root, algo=algo,
                                    async_op=root % 2 == 1)
                got = work.wait() if root % 2 else work
                check.equal(got, pieces[rank], f"scatter from a list {dtype} {piece} a rank "
                                               f"root={root} algo={algo}")


def splits_patterns(k):
    """Every rank's splits (matrix[p][q]: elements rank p sends rank q), uneven and empty."""
    yield "uneven", [[(p + 2 * q + k) % 5 for q in range(size)] for p in range(size)]
    yield "only to the next", [[k * (q == (p + 1) % size) for q in range(size)]
                               for p in range(size)]
    yield "zero", [[0] * size for _ in range(size)]


for dtype in dtypes:
    segment = (64 << 10) // dtype.itemsize
    for per_rank in capped([0, 1, 5, segment // 2 + 3]):
        count = per_rank * size
        xs = [make_input(dtype, "sum", count, r, size) for r in range(size)]
        want = np.concatenate([xs[p][rank * per_rank:(rank + 1) * per_rank]
                               for p in range(size)])
        for algo in algos(xs[0].nbytes):
            label = f"{dtype} even count={count} algo={algo}"
            check.equal(comm.all_to_all(xs[rank], algo=algo), want, f"all_to_all {label}")
            out = np.full(count, 99, dtype)
            check.true(comm.all_to_all(xs[rank], out=out, algo=algo) is out,
                       f"all_to_all(out=) returns out, {label}")
            check.equal(out, want, f"all_to_all out= {label}")
            work = comm.all_to_all(xs[rank], algo=algo, async_op=True)
            check.equal(work.wait(), want, f"all_to_all async {label}")
    for k in capped([1, 3, segment + 1]):
        for pattern, m in splits_patterns(k):
            xs = [make_input(dtype, "sum", sum(m[p]), p, size) for p in range(size)]
            starts = [np.cumsum([0] + m[p]) for p in range(size)]
            want = np.concatenate([xs[p][starts[p][rank]:starts[p][rank + 1]]
                                   for p in range(size)])
            takes = [m[p][rank] for p in range(size)]
            for algo in algos(max(x.nbytes for x in xs)):
                label = f"{dtype} splits={pattern} k={k} algo={algo}"
                got = comm.all_to_all(xs[rank], splits=m[rank], algo=algo)
                check.equal(got, want, f"all_to_all learned out_splits {label}")
                out = np.full(want.size, 99, dtype)
                comm.all_to_all(xs[rank], out=out, splits=m[rank], out_splits=takes, algo=algo)
                check.equal(out, want, f"all_to_all out_splits {label}")
                work = comm.all_to_all(xs[rank], splits=m[rank], out_splits=takes, algo=algo,
                                       async_op=True)
                check.equal(work.wait(), want, f"all_to_all async {label}")


def rounds(call, label):
    """Checks the rounds of headers (the transport's calls) call() makes on this rank; its
    result, waited for where it is a Work."""
    before = comm._backend.sequence
    got = call()
    got = got.wait() if isinstance(got, dpcore.Work) else got
    made = comm._backend.sequence - before
    want = 2 if label.startswith("gather sizing") else 1
    check.true(made == want, f"{label}: {made} rounds of headers, expected {want}")
    return got


# A gather whose root passes out, and a scatter, are one round on every rank: the shards'
# lengths come in the call's own headers. A gather whose root sizes its out learns them first,
# which the other ranks' gather meets, blocking or async: two rounds on every rank.
shard, last = np.full(rank + 1, rank, np.float32), size - 1
whole = np.repeat(np.arange(size, dtype=np.float32), np.arange(1, size + 1))
out = np.empty(whole.size, np.float32) if rank == last else None
rounds(lambda: comm.gather(shard, root=last, out=out), "gather(out=)")
if rank == last:
    check.equal(out, whole, "gather(out=) in one round")
got = rounds(lambda: comm.scatter(whole if rank == last else None,
                                  np.empty(rank + 1, np.float32), root=last), "scatter")
check.equal(got, shard, "scatter in one round")
for async_op in (False, True):
    label = f"gather sizing its out, async={async_op}"
    got = rounds(lambda: comm.gather(shard, root=0, async_op=async_op and rank != 0), label)
    check.true(np.array_equal(got, whole) if rank == 0 else got is None, label)

# N-D input: x read flat, and out in x's shape with equal splits
x = np.arange(size * 6, dtype=np.float32).reshape(size, 2, 3) + 100 * rank
want = np.stack([np.arange(rank * 6, rank * 6 + 6, dtype=np.float32) + 100 * p
                 for p in range(size)]).reshape(size, 2, 3)
check.equal(comm.all_to_all(x), want, "all_to_all N-D keeps x's shape")
got = comm.gather(x, root=size - 1)
if rank == size - 1:
    check.equal(got, np.concatenate([(x - 100 * rank + 100 * p).ravel() for p in range(size)]),
                "gather N-D reads the shard flat")

# Without splits every rank sends as many as rank 0: a larger x on rank 1 is refused by all
# (ValueError there, CommError elsewhere) before anything moves, and the communicator lives.
if size > 1:
    try:
        comm.all_to_all(np.ones(size * (2 + (rank == 1)), np.float32))
        check.true(False, "all_to_all without splits, x larger on rank 1: no error")
    except (ValueError, dpcore.CommError) as e:
        expected = ValueError if rank == 1 else dpcore.CommError
        check.true(type(e).__name__ == expected.__name__ and "rank 1 sends" in str(e),
                   f"all_to_all without splits, x larger on rank 1: {type(e).__name__}: {e}")
    check.equal(comm.all_to_all(np.full(size, rank, np.float32)),
                np.arange(size, dtype=np.float32), "all_to_all after the refusal")

check.finish()
comm.close()
