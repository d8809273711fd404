"""The plain call (dpcore/comm/plain.py, csrc/bind_plain.cc) runs a user's loop's call without
the full checks, so it must take no call that they refuse:

- every bad call below is declined by the entry (NotImplemented, nothing sent) and then refused
  by the verb on the rank that made it, with the full checks' error; only that rank calls;
- calls it does not know but the full checks take (in place gather, a root's gather that
  learns the shards' sizes) run through them, exactly;
- the calls of a user's loop are the entry's own: it runs them (not NotImplemented), exactly,
  blocking and async, for every NumPy alias of the reduced dtypes, and a named algorithm is the
  one that runs; from another thread it declines them, unless the communicator is lent to that
  thread; once closed, it declines everything.

Usage: mpiexec -n 2 python -m mpi4py plain_calls.py
"""
import threading

import numpy as np

import dpcore
from checks import Checker, say
from dpcore.dtypes import ALL_REDUCE, ALL_TO_ALL, BARRIER, BROADCAST, GATHER, REDUCE, SCATTER

comm = dpcore.init(timeout=20)
rank, size = comm.rank, comm.size
check = Checker(rank)
entry = comm._plain
f32 = np.float32


def x_of(r, n=6, dtype=f32):
    return np.arange(n, dtype=dtype) + r


def frozen(a):
    a.flags.writeable = False
    return a


def declined(label, coll, x, out, root, op, verb, error, algo="auto"):
    """The entry declines (coll, x, out, root, op, algo) and the verb raises `error` on this
    rank."""
    check.true(entry(coll, x, out, root, op, algo, False) is NotImplemented,
               f"{label}: the entry declines it")
    try:
        verb()
    except error:
        return
    except Exception as e:  # noqa: BLE001 (the wrong kind is the finding)
        check.true(False, f"{label}: raised {type(e).__name__}: {e}, not {error.__name__}")
        return
    check.true(False, f"{label}: the verb took it")


# Fill auto's bands (the first call of each verb computes them, through the full checks).
comm.all_reduce(x_of(rank))
comm.reduce(x_of(rank), out=np.empty(6, f32) if rank == 0 else None)
comm.broadcast(x_of(rank))

x = x_of(rank)
grid = np.ones((3, 4), f32)
buf = np.zeros(16, f32)
BAD = [  # (label, coll, x, out, root, op, error): every rank calls each
    ("all_reduce: Fortran x", ALL_REDUCE, np.asfortranarray(grid), None, 0, "sum", ValueError),
    ("all_reduce: a strided x", ALL_REDUCE, buf[::2], None, 0, "sum", ValueError),
    ("all_reduce: unknown op", ALL_REDUCE, x, None, 0, "bogus", ValueError),
    ("all_reduce: op not a str", ALL_REDUCE, x, None, 0, 0, ValueError),
    ("all_reduce: avg of int32", ALL_REDUCE, x.astype(np.int32), None, 0, "avg", TypeError),
    ("all_reduce: bool reduced", ALL_REDUCE, x > 2, None, 0, "sum", TypeError),
    ("all_reduce: big-endian x", ALL_REDUCE, x.astype(">f4"), None, 0, "sum", TypeError),
    ("all_reduce: object x", ALL_REDUCE, x.astype(object), None, 0, "sum", TypeError),
    ("all_reduce: a list", ALL_REDUCE, [1.0, 2.0], None, 0, "sum", TypeError),
    ("all_reduce: out of float64", ALL_REDUCE, x, np.empty(6), 0, "sum", TypeError),
    ("all_reduce: out of 7", ALL_REDUCE, x, np.empty(7, f32), 0, "sum", ValueError),
    ("all_reduce: out reshaped", ALL_REDUCE, grid, np.empty((4, 3), f32), 0, "sum", ValueError),
    ("all_reduce: out flat", ALL_REDUCE, grid, np.empty(12, f32), 0, "sum", ValueError),
    ("all_reduce: read-only out", ALL_REDUCE, x, frozen(np.empty(6, f32)), 0, "sum", ValueError),
    ("all_reduce: out partly over x", ALL_REDUCE, buf[:12], buf[2:14], 0, "sum", ValueError),
    ("all_reduce: strided out", ALL_REDUCE, x, np.empty(12, f32)[::2], 0, "sum", ValueError),
    ("reduce: root = size", REDUCE, x, None, size, "sum", ValueError),
    ("reduce: root -1", REDUCE, x, None, -1, "sum", ValueError),
    ("reduce: root 0.0", REDUCE, x, None, 0.0, "sum", ValueError),
    ("reduce: root '0'", REDUCE, x, None, "0", "sum", ValueError),
    ("reduce: unknown op", REDUCE, x, None, 0, "bogus", ValueError),
    ("broadcast: read-only x", BROADCAST, frozen(x_of(rank)), None, 0, None, ValueError),
    ("broadcast: root = size", BROADCAST, x, None, size, None, ValueError),
    ("broadcast: Fortran x", BROADCAST, np.asfortranarray(grid), None, 0, None, ValueError),
    ("gather: root = size", GATHER, x, None, size, None, ValueError),
    ("scatter: root -1", SCATTER, None, np.empty(3, f32), -1, None, ValueError),
    ("all_to_all: x of 7", ALL_TO_ALL, x_of(rank, 7), None, 0, None, ValueError),
    ("all_to_all: out of 8", ALL_TO_ALL, x, np.empty(8, f32), 0, None, ValueError),
    ("all_to_all: out of int32", ALL_TO_ALL, x, np.empty(6, np.int32), 0, None, TypeError),
    ("all_to_all: read-only out", ALL_TO_ALL, x, frozen(np.empty(6, f32)), 0, None, ValueError),
    ("all_to_all: out is x", ALL_TO_ALL, x, x, 0, None, ValueError),
    ("all_to_all: strided x", ALL_TO_ALL, buf[::2], None, 0, None, ValueError),
]
verbs = {ALL_REDUCE: lambda x, out, root, op: comm.all_reduce(x, op, out=out),
         REDUCE: lambda x, out, root, op: comm.reduce(x, root, op, out=out),
         BROADCAST: lambda x, out, root, op: comm.broadcast(x, root),
         GATHER: lambda x, out, root, op: comm.gather(x, root, out=out),
         SCATTER: lambda x, out, root, op: comm.scatter(x, out, root),
         ALL_TO_ALL: lambda x, out, root, op: comm.all_to_all(x, out)}
for label, coll, a, out, root, op, error in BAD:
    declined(label, coll, a, out, root, op, lambda: verbs[coll](a, out, root, op), error)

# Algorithms the full checks refuse, by name or for the size
over = x_of(rank, comm.one_shot_bytes // 4 + 1)  # one element past one_shot's limit
ALGO_BAD = [("all_reduce", ALL_REDUCE, x, "sum", "bogus"),
            ("all_reduce", ALL_REDUCE, x, "sum", "counts_only"),
            ("all_reduce", ALL_REDUCE, over, "sum", "one_shot"),
            ("broadcast", BROADCAST, over, None, "one_shot"),
            ("gather", GATHER, x, None, "ring"),
            ("all_to_all", ALL_TO_ALL, x, None, "ring"),
            ("all_to_all", ALL_TO_ALL, over[:size * 8], None, 7)]
if not comm.direct:
    ALGO_BAD.append(("all_reduce", ALL_REDUCE, x, "sum", "direct"))
verbs_by_algo = {
    ALL_REDUCE: lambda a, op, algo: comm.all_reduce(a, op, algo=algo),
    BROADCAST: lambda a, op, algo: comm.broadcast(a, 0, algo=algo),
    GATHER: lambda a, op, algo: comm.gather(a, 0, out=None if rank else np.empty(6 * size, f32),
                                            algo=algo),
    ALL_TO_ALL: lambda a, op, algo: comm.all_to_all(a, algo=algo)}
for name, coll, a, op, algo in ALGO_BAD:
    out = np.empty(6 * size, f32) if coll == GATHER and rank == 0 else None
    declined(f"{name}: algo {algo!r} for {a.nbytes} bytes", coll, a, out, 0, op,
             lambda: verbs_by_algo[coll](a, op, algo), ValueError, algo)

# What only one rank gets wrong: the root's or a non-root's own part (the other makes no call)
ONE_RANK = {
    0: [("reduce: the root's out of float64", REDUCE, x, np.empty(6), 0, "sum", TypeError),
        ("gather: the root's out overlaps its shard partly", GATHER, buf[:3], buf[2:8], 0, None,
         ValueError),
        ("gather: the root's out read-only", GATHER, x, frozen(np.empty(12, f32)), 0, None,
         ValueError),
        ("gather: the root's out of int32", GATHER, x, np.empty(12, np.int32), 0, None,
         TypeError),
        ("scatter: the root's x of float64", SCATTER, np.zeros(6), np.empty(3, f32), 0, None,
         TypeError),
        ("scatter: the root's x overlaps out", SCATTER, buf[:6], buf[4:7], 0, None, ValueError),
        ("scatter: the root's x missing", SCATTER, None, np.empty(3, f32), 0, None, ValueError)],
    1: [("reduce: out off the root", REDUCE, x, np.empty(6, f32), 0, "sum", ValueError),
        ("gather: out off the root", GATHER, x, np.empty(12, f32), 0, None, ValueError),
        ("scatter: x off the root", SCATTER, np.zeros(6, f32), np.empty(3, f32), 0, None,
         ValueError),
        ("scatter: a read-only out", SCATTER, None, frozen(np.empty(3, f32)), 0, None,
         ValueError)],
}
for label, coll, a, out, root, op, error in ONE_RANK[rank]:
    declined(label, coll, a, out, root, op, lambda: verbs[coll](a, out, root, op), error)

# The full checks' own calls: declined by the entry, exact through the verb
whole = np.concatenate([x_of(r, 3) for r in range(size)])
gathered = np.zeros(3 * size, f32)
gathered[3 * rank:3 * rank + 3] = x_of(rank, 3)
mine = gathered[3 * rank:3 * rank + 3]  # in place: the shard at its place in out
check.true(entry(GATHER, mine, gathered, rank, None, "auto", False) is NotImplemented,
           "gather in place: declined")
for root in range(size):
    got = comm.gather(x_of(rank, 3), root)  # the root learns the sizes: declined
    check.equal(got if rank == root else np.zeros(0, f32),
                whole if rank == root else np.zeros(0, f32), f"gather to {root}, out learned")
comm.gather(gathered[3:6] if rank == 1 else x_of(0, 3), 1, out=gathered if rank == 1 else None)
if rank == 1:
    check.equal(gathered, whole, "gather in place on root 1")

# The calls of a user's loop: the entry's own, exact
total = sum(x_of(r) for r in range(size))
REDUCED_CHARS = "bBiIlLqQpPefd"  # every alias of a reduced dtype: int64 is 'l', 'q' and 'p'
for char in REDUCED_CHARS:
    a = x_of(rank, dtype=np.dtype(char))
    want = sum(x_of(r, dtype=np.dtype(char)) for r in range(size)).astype(a.dtype)
    got = entry(ALL_REDUCE, a, None, 0, "sum", "auto", False)
    check.true(got is not NotImplemented and got.dtype == a.dtype, f"all_reduce {char}: plain")
    if got is not NotImplemented:
        check.equal(got, want, f"all_reduce {char}")
out = np.empty(6, f32)
check.true(entry(ALL_REDUCE, x, out, 0, "sum", "auto", False) is out, "all_reduce into out")
check.equal(out, total, "all_reduce into out")
y = x_of(rank)
check.true(entry(ALL_REDUCE, y, y, 0, "max", "auto", False) is y, "all_reduce in place")
check.equal(y, x_of(size - 1), "all_reduce in place, max")
for root in range(size):
    got = entry(REDUCE, x, None, root, "sum", "auto", False)
    check.true(got is None if rank != root else got is not NotImplemented, f"reduce to {root}")
    if rank == root:
        check.equal(got, total, f"reduce to {root}")
    b = x_of(rank)
    check.true(entry(BROADCAST, b, None, root, None, "auto", False) is b, f"broadcast {root}")
    check.equal(b, x_of(root), f"broadcast from {root}")
    out = np.empty(3 * size, f32) if rank == root else None
    got = entry(GATHER, x_of(rank, 3), out, root, None, "auto", False)
    check.true(got is out, f"gather to {root}: plain")
    if rank == root:
        check.equal(out, whole, f"gather to {root}")
    out = np.empty(3, f32)
    got = entry(SCATTER, whole + 1 if rank == root else None, out, root, None, "auto", False)
    check.true(got is out, f"scatter from {root}: plain")
    check.equal(out, x_of(rank, 3) + 1, f"scatter from {root}")
# all_to_all: rank r gets the r-th part of every rank's x, in rank order
exchanged = np.concatenate([x_of(q)[3 * rank:3 * rank + 3] for q in range(size)])
got = entry(ALL_TO_ALL, x, None, 0, None, "auto", False)
check.true(got is not NotImplemented and got.shape == x.shape, "all_to_all: plain")
if got is not NotImplemented:
    check.equal(got, exchanged, "all_to_all")
out = np.empty((2, 3), f32)  # any shape of as many elements
check.true(entry(ALL_TO_ALL, x, out, 0, None, "auto", False) is out, "all_to_all into out")
check.equal(out.ravel(), exchanged, "all_to_all into out")
# A named algorithm is the one that runs (the communicator counts what ran)
named = ["one_shot", "ring"] + (["direct"] if comm.direct else [])
for algo in named:
    before = comm.algorithm_calls().get(algo, 0)
    got = entry(ALL_REDUCE, x, None, 0, "sum", algo, False)
    check.true(got is not NotImplemented, f"all_reduce, algo {algo}: plain")
    if got is not NotImplemented:
        check.equal(got, total, f"all_reduce, algo {algo}")
    check.true(comm.algorithm_calls().get(algo, 0) == before + 1, f"all_reduce ran {algo}")
for algo in ["one_shot"] + (["direct"] if comm.direct else []):
    before = comm.algorithm_calls().get(algo, 0)
    got = entry(ALL_TO_ALL, x, None, 0, None, algo, False)
    check.true(got is not NotImplemented, f"all_to_all, algo {algo}: plain")
    if got is not NotImplemented:
        check.equal(got, exchanged, f"all_to_all, algo {algo}")
    check.true(comm.algorithm_calls().get(algo, 0) == before + 1, f"all_to_all ran {algo}")
empty = np.empty(0, np.uint8)
check.true(entry(BARRIER, empty, None, 0, None, "auto", False) is None, "barrier: plain")
work = entry(ALL_REDUCE, x, None, 0, "sum", "auto", True)
check.true(isinstance(work, dpcore.Work), "async: a Work")
check.equal(work.wait(20), total, "async all_reduce")

# Another thread's call is declined (the full checks refuse it), and taken when lent
seen = {}


def from_another_thread():
    seen["stranger"] = entry(ALL_REDUCE, x, None, 0, "sum", "auto", False)
    with comm.lent_to_this_thread():
        seen["lent"] = entry(ALL_REDUCE, x, None, 0, "sum", "auto", False)


thread = threading.Thread(target=from_another_thread)
thread.start()
thread.join()
check.true(seen["stranger"] is NotImplemented, "another thread's call: declined")
check.equal(seen["lent"], total, "a lent thread's call")
check.equal(comm.all_reduce(x), total, "the owner's call, after the lending")

comm.close()
check.true(entry(ALL_REDUCE, x, None, 0, "sum", "auto", False) is NotImplemented,
           "closed: declined")
check.finish()
say(rank, "ok (plain calls)")
