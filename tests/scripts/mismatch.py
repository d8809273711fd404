"""Ranks that call different collectives (name, count, dtype, op, root, algorithm), blocking or
async, all get dpcore.CommError naming the collective, its sequence number and the ranks; the
broken communicator then refuses work, blocking or async, instead of hanging (an all_gather
output that does not fit the shards is refused without breaking anything: refused.py); a rank
that never arrives is named by the others' CommError once the timeout runs out; a fresh
communicator works afterwards. The same on every transport (run under DPCORE_TRANSPORT /
DPCORE_NODE_SIZE).

Usage: mpiexec -n K python -m mpi4py mismatch.py
Prints 'rank R: error KIND | MESSAGE' for every kind, then 'rank R: ok (...)'.
"""
import re
import time

import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, say

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
check = Checker(rank)
f32 = np.float32
odd = rank == 0  # rank 0 calls something different from the others

# kind: (collective rank 0 calls, collective the others call, the call)
KINDS = {
    "collective": ("all_reduce", "broadcast",
                   lambda c: c.all_reduce(np.ones(8, f32)) if odd else
                   c.broadcast(np.ones(8, f32))),
    "count": ("all_reduce", "all_reduce", lambda c: c.all_reduce(np.ones(10 if odd else 11, f32))),
    "dtype": ("all_reduce", "all_reduce",
              lambda c: c.all_reduce(np.ones(8, f32 if odd else np.float64))),
    "op": ("all_reduce", "all_reduce",
           lambda c: c.all_reduce(np.ones(8, f32), op="sum" if odd else "max")),
    "root": ("broadcast", "broadcast",
             lambda c: c.broadcast(np.ones(8, f32), root=0 if odd else size - 1)),
    "reduce root": ("reduce", "reduce",
                    lambda c: c.reduce(np.ones(8, f32), root=0 if odd else size - 1)),
    "reduce op": ("reduce", "reduce",
                  lambda c: c.reduce(np.ones(9, f32), op="max" if odd else "sum", algo="ring")),
    "algo": ("all_reduce", "all_reduce",
             lambda c: c.all_reduce(np.ones(8, f32), algo="ring" if odd else "one_shot")),
    "ring count": ("all_reduce", "all_reduce",
                   lambda c: c.all_reduce(np.ones(100_000 + odd, f32), algo="ring")),
    "reduce_scatter op": ("reduce_scatter", "reduce_scatter",
                          lambda c: c.reduce_scatter(np.ones(9, f32), op="min" if odd else "sum")),
    "reduce_scatter dtype": ("reduce_scatter", "reduce_scatter",
                             lambda c: c.reduce_scatter(np.ones(8, f32 if odd else np.float64))),
    # rank 0, the root, learns the shards' lengths first; the others' gather meets that round
    "gather dtype": ("gather", "gather",
                     lambda c: c.gather(np.ones(3, f32 if odd else np.float64), root=0)),
    "async count": ("all_reduce", "all_reduce",
                    lambda c: c.all_reduce(np.ones(5 + odd, f32), async_op=True).wait(30)),
}


def expect_error(kind, call, pattern):
    """call() must raise CommError whose message matches pattern; returns the match."""
    try:
        call()
        check.true(False, f"{kind}: no CommError on rank {rank}")
        return None
    except dpcore.CommError as e:
        message = str(e)
        say(rank, f"error {kind} | {message}")
        # A rank may hear a peer's failure before it finds the mismatch itself (over MPI the
        # peer's goodbye can overtake a header it still waits for): then it says the peer's
        # message, which names the same call, after "rank R failed: ".
        m = re.match(pattern, re.sub(r"^(dpcore \w+ #\d+ on rank \d+: )rank \d+ failed: "
                                     r"dpcore \w+ #\d+ on rank \d+: ", r"\1", message))
        check.true(m is not None, f"{kind}: message format: {message}")
        return m


for kind, (name_on_0, name_on_others, call) in KINDS.items():
    if size == 1:
        continue  # one rank cannot disagree with itself
    comm = dpcore.init(timeout=30)
    comm.all_reduce(np.ones(3, f32))  # #1
    comm.barrier()                    # #2
    m = expect_error(kind, lambda: call(comm),  # #3
                     r"dpcore (\w+) #(\d+) on rank (\d+): mismatch: (.*)")
    if m:
        called = name_on_0 if odd else name_on_others
        check.true(m.group(1) == called, f"{kind}: names {m.group(1)}, expected {called}")
        check.true(m.group(2) == "3", f"{kind}: sequence number {m.group(2)}, expected 3")
        check.true(m.group(3) == str(rank), f"{kind}: names rank {m.group(3)}")
        if size > 1:  # ... and the rank it disagrees with
            other = r"rank [1-9]\d* called" if odd else r"rank 0 called"
            check.true(re.search(other, m.group(4)), f"{kind}: names the other rank: {m.group(4)}")
    # once broken, the communicator refuses further work, blocking or async, instead of hanging
    for how, again in [("blocking", lambda: comm.all_reduce(np.ones(3, f32))),
                       ("async", lambda: comm.all_reduce(np.ones(3, f32), async_op=True).wait(30))]:
        try:
            again()
            check.true(False, f"{kind}: a {how} collective after the failure succeeded")
        except dpcore.CommError as e:
            check.true("unusable" in str(e), f"{kind}: {how} call after the failure: {e}")
    comm.close()

# gather and scatter with another root: a mismatch like any other; all_to_all splits that
# disagree: the same CommError on every rank, before the call, naming the ranks and counts, and
# the communicator stays usable.
if size > 1:
    other = 0 if odd else size - 1
    ROOTED = {
        "gather root": lambda c: c.gather(np.ones(3, f32), root=other),
        "scatter root": lambda c: c.scatter(np.ones(3 * size, f32) if rank == other else None,
                                            np.empty(3, f32), root=other),
    }
    for kind, call in ROOTED.items():
        comm = dpcore.init(timeout=30)
        m = expect_error(kind, lambda: call(comm),
                         r"dpcore (\w+) #\d+ on rank (\d+): mismatch: .*root=(\d+)")
        check.true(m is None or m.group(1) == kind.split()[0], f"{kind}: names the collective")
        comm.close()
    comm = dpcore.init(timeout=30)
    splits = [1] * size  # rank 0 expects 2 elements from every rank
    takes = [2 if odd else 1] * size
    m = expect_error("all_to_all splits",
                     lambda: comm.all_to_all(np.ones(size, f32), splits=splits,
                                             out_splits=takes),
                     r"dpcore all_to_all: the ranks' splits disagree: rank 0 sends rank 0 1 "
                     r"elements but rank 0 expects 2; rank 1 sends rank 0 1")
    check.equal(comm.all_to_all(np.full(size, rank, f32), splits=splits),
                np.arange(size, dtype=f32), "all_to_all after disagreeing splits")
    comm.close()

# A rank that never arrives: the others time out, naming it.
if size > 1:
    comm = dpcore.init(timeout=1)
    comm.all_reduce(np.ones(3, f32))  # #1
    if rank != 0:
        start = time.monotonic()
        # the first rank to time out may tell the others first: "aborted: ..." on shared
        # memory, "rank 1 gave up: ..." over MPI
        expect_error("timeout", lambda: comm.all_reduce(np.ones(3, f32)),  # #2
                     r"dpcore all_reduce #2 on rank (\d+): ((aborted: |rank \d+ gave up: )"
                     r"dpcore all_reduce #2 on rank \d+: )?timed out after 1 s waiting for "
                     r"rank 0\b")
        waited = time.monotonic() - start
        # not at once, and not much later; a peer that entered first may time out and tell
        # this rank a little before its own second is up
        check.true(0.5 <= waited < 20, f"timeout: raised after {waited:.2f} s, timeout 1 s")
    world.Barrier()
    comm.close()

# A fresh communicator works.
with dpcore.init() as comm:
    check.equal(comm.all_reduce(np.ones(5, f32)), np.full(5, size, f32), "fresh communicator")
    check.equal(comm.all_reduce(np.ones(100_003, f32)), np.full(100_003, size, f32),
                "fresh communicator, ring")
check.finish()
