"""Exchanges in rounds through the one-shot slots (DPCORE_READ_PEERS=0, a small
DPCORE_ONE_SHOT_BYTES), where a rank that overwrote a window a slower peer had not yet taken
would show. Many calls back to back, each of several rounds, at uneven sizes: all_to_all with
splits that differ per call (ranks that take much, others little or nothing), gather to every
root in turn (its peers take nothing and would run ahead), scatter (from one array, or from a
list whose pieces a window spans), and after each one a one_shot call, whose payload lands in
the slot that the next call's parity owns. Every element is unique to (call, rank, index), so a
stale window, from an earlier round or call, never passes.

Usage: mpiexec -n K python -m mpi4py exchange_rounds.py [CALLS]
"""
import sys

import numpy as np

import dpcore
from checks import Checker

calls = int(sys.argv[1]) if len(sys.argv) > 1 else 60
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)
slot = comm.one_shot_bytes // 8  # int64 elements a one-shot payload holds (a round: more)


def data(call, r, count):
    """Rank r's input of call `call`: values no other call, rank or index has."""
    return (np.int64(call * size + r) << 32) + np.arange(count, dtype=np.int64)


for call in range(calls):
    rng = np.random.default_rng(call)  # alike on every rank: each knows every input
    kind = ("all_to_all", "gather", "scatter")[call % 3]
    root = call // 3 % size
    if kind == "all_to_all":  # a few ranks send much, to a few: others wait, or run ahead
        m = rng.integers(0, 3 * slot, (size, size)) * (rng.random((size, size)) < 0.6)
        xs = [data(call, p, m[p].sum()) for p in range(size)]
        starts = [np.cumsum(np.r_[0, m[p]]) for p in range(size)]
        want = np.concatenate([xs[p][starts[p][rank]:starts[p][rank + 1]] for p in range(size)])
        got = comm.all_to_all(xs[rank], splits=[int(v) for v in m[rank]])
    elif kind == "gather":
        sizes = rng.integers(0, 8 * slot, size)
        xs = [data(call, p, sizes[p]) for p in range(size)]
        want = np.concatenate(xs) if rank == root else None
        got = comm.gather(xs[rank], root=root)
    elif call % 2:
        sizes = rng.integers(0, 4 * slot, size)
        whole = data(call, root, sizes.sum())
        want = whole[sizes[:rank].sum():sizes[:rank + 1].sum()]
        got = comm.scatter(whole if rank == root else None, np.empty(sizes[rank], np.int64),
                           root=root)
    else:  # from a list: the root's windows span its pieces
        piece = int(rng.integers(0, 4 * slot))
        pieces = [data(call, size + q, piece) for q in range(size)]
        want = pieces[rank]
        got = comm.scatter(pieces if rank == root else None, np.empty(piece, np.int64),
                           root=root)
    label = f"call {call}: {kind}" + (f" root={root}" if kind != "all_to_all" else "")
    if rank == root or kind != "gather":
        check.equal(got, want, label)
    small = data(call, rank, size)  # one_shot: its payload fills the other parity's slot
    check.equal(comm.all_to_all(small, algo="one_shot"),
                np.array([data(call, p, size)[rank] for p in range(size)]), f"{label}, next")

check.finish()
comm.close()
