"""An `out` that partly overlaps the input raises ValueError on the rank that passed it, before
anything is sent, for every collective and algorithm: the other ranks never see the call, and
the next collective, on every rank, is exact. The in-place forms still work and are exact: out
the very memory of x (also through another view of it), reduce_scatter's out this rank's own
shard of x, all_gather's shard this rank's own slice of out.

Usage: mpiexec -n K python -m mpi4py overlap.py
"""
import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, expect_transport, make_input, mpi_allgatherv, reference

world = MPI.COMM_WORLD
comm = dpcore.init(timeout=20)  # a bad call that did send something would hang the next one
rank, size = comm.rank, comm.size
check = Checker(rank)
expect_transport(comm, check)
i32 = np.dtype(np.int32)
ALGOS = ["auto", "ring", "one_shot"] + (["direct"] if comm.direct else [])


def count_for(algo):
    return 500 if algo == "one_shot" else 5000  # the ring takes several segments of 5000


def inputs(count):
    """(this rank's x, every rank's x): exact integer data, unique per element and rank."""
    every = [make_input(i32, "sum", count, r, size) for r in range(size)]
    return every[rank].copy(), every


def placed(buf, at, values):
    """buf[at:at + len(values)] = values, returned as that view."""
    view = buf[at:at + values.size]
    view[...] = values
    return view


def shard_of(count, r=None):
    start, stop = dpcore.shard_range(count, size, rank if r is None else r)
    return start, stop


# -- the bad calls: (what, the call), each made by one rank in turn --------------------------

def all_reduce_shifted(algo, shift):
    """out = x moved by `shift` elements inside one buffer (negative: out starts first)."""
    n = count_for(algo)
    x, _ = inputs(n)
    buf = np.zeros(n + abs(shift), i32)
    xv = placed(buf, max(0, -shift), x)
    out = buf[max(0, shift):max(0, shift) + n]
    return lambda: comm.all_reduce(xv, out=out, algo=algo)


def reduce_scatter_misplaced(algo, shift):
    """out is shard-sized and inside x's buffer, but `shift` elements off this rank's shard."""
    n = count_for(algo)
    x, _ = inputs(n)
    buf = np.zeros(n + 8, i32)
    xv = placed(buf, 4, x)
    start, stop = shard_of(n)
    out = buf[4 + start + shift:4 + stop + shift]
    return lambda: comm.reduce_scatter(xv, out=out, algo=algo)


def all_gather_straddling(algo):
    """The shard starts inside out and runs past its end."""
    n = 7
    total = n * size
    buf = np.zeros(total + n, i32)
    out = buf[:total]
    shard = placed(buf, total - 1, make_input(i32, "sum", n, rank, size))
    return lambda: comm.all_gather(shard, out=out, algo=algo)


def all_gather_misaligned(algo):
    """The shard lies inside out but between its elements (2 bytes into one)."""
    n = 7
    total = n * size
    raw = np.zeros(4 * (total + 1), np.uint8)
    out = raw[:4 * total].view(i32)
    shard = raw[2:2 + 4 * n].view(i32)
    return lambda: comm.all_gather(shard, out=out, algo=algo)


def all_gather_out_inside_shard(algo):
    """out lies inside the shard's memory (and is too short for the gather anyway)."""
    n = 7 * size
    shard = make_input(i32, "sum", n, rank, size)
    return lambda: comm.all_gather(shard, out=shard[1:1 + size], algo=algo)


BAD = []
for algo in ALGOS:
    n = count_for(algo)
    BAD += [(f"all_reduce {algo}, out one element after x", all_reduce_shifted(algo, 1)),
            (f"all_reduce {algo}, out half of x after it", all_reduce_shifted(algo, n // 2)),
            (f"all_reduce {algo}, out one element before x", all_reduce_shifted(algo, -1)),
            (f"reduce_scatter {algo}, out one element past this rank's shard",
             reduce_scatter_misplaced(algo, 1)),
            (f"reduce_scatter {algo}, out one element before this rank's shard",
             reduce_scatter_misplaced(algo, -1)),
            (f"all_gather {algo}, shard running past the end of out",
             all_gather_straddling(algo)),
            (f"all_gather {algo}, shard between out's elements", all_gather_misaligned(algo)),
            (f"all_gather {algo}, out inside the shard", all_gather_out_inside_shard(algo))]
async_buf = np.arange(5001, dtype=i32)
BAD.append(("async all_reduce, out one element after x",
            lambda: comm.all_reduce(async_buf[:5000], out=async_buf[1:], async_op=True).wait(20)))

for k, (what, call) in enumerate(BAD):
    culprit = k % size
    if rank == culprit:
        try:
            call()
            check.true(False, f"{what}: no exception (expected ValueError)")
        except ValueError as e:
            check.true("overlap" in str(e), f"{what}: the message does not say why: {e}")
        except Exception as e:
            check.true(False, f"{what}: raised {type(e).__name__}: {e} (expected ValueError)")
    # every rank, the culprit included: a correct collective right after the bad call
    good, every = inputs(7 + k)
    try:
        check.equal(comm.all_reduce(good), reference("sum", every),
                    f"all_reduce after '{what}' on rank {culprit}")
    except dpcore.CommError as e:
        check.true(False, f"'{what}' on rank {culprit} was not refused locally: the next "
                          f"all_reduce raised CommError: {e}")
        comm = dpcore.init(timeout=20)

# -- every rank makes the same mistake at once (the usual bug): every rank refuses it --------
for what, call in [("all_reduce ring", all_reduce_shifted("ring", 1)),
                   ("reduce_scatter ring", reduce_scatter_misplaced("ring", 1))]:
    try:
        call()
        check.true(False, f"{what} on every rank: no exception (expected ValueError)")
    except ValueError:
        pass
    good, every = inputs(5)
    check.equal(comm.all_reduce(good), reference("sum", every), f"all_reduce after {what}")

# -- the in-place forms: exact ----------------------------------------------------------------
for algo in ALGOS:
    n = count_for(algo)
    x, every = inputs(n)
    want = reference("sum", every)
    y = x.copy()
    check.true(comm.all_reduce(y, out=y, algo=algo) is y, f"all_reduce {algo} out=x returns x")
    check.equal(y, want, f"all_reduce {algo} out=x")
    y = x.copy()
    comm.all_reduce(y, out=y[:], algo=algo)
    check.equal(y, want, f"all_reduce {algo} out=another view of x")
    y = x.copy().reshape(size, -1) if n % size == 0 else x.copy().reshape(1, -1)
    comm.all_reduce(y, out=y.reshape(y.shape), algo=algo)
    check.equal(y.reshape(-1), want, f"all_reduce {algo} 2-D, out=a reshaped view of x")
    y = x.copy()
    start, stop = shard_of(n)
    comm.reduce_scatter(y, out=y[start:stop], algo=algo)
    check.equal(y[start:stop], want[start:stop], f"reduce_scatter {algo} into its own shard")
    check.equal(y[:start], x[:start], f"reduce_scatter {algo} leaves the rest of x alone")
    shard = make_input(i32, "sum", 3 + rank, rank, size)
    gathered = mpi_allgatherv(world, shard)
    out = np.zeros(gathered.size, i32)
    offset = sum(3 + r for r in range(rank))
    comm.all_gather(placed(out, offset, shard), out=out, algo=algo)
    check.equal(out, gathered, f"all_gather {algo} from its own slice of out")
    # no overlap at all: two slices of one buffer side by side
    buf = np.zeros(2 * n, i32)
    xv = placed(buf, 0, x)
    check.equal(comm.all_reduce(xv, out=buf[n:], algo=algo), want,
                f"all_reduce {algo} into the half of x's buffer after it")

comm.close()
check.finish()
