"""An all_gather whose out cannot hold what the peers send, which no rank can tell alone (out one
element too long or too short on one rank; a shard inside out, but not at this rank's own place
in it), and the same for gather, scatter and all_to_all (the root's buffer, an out that does not
hold what the splits send): the rank that passed it raises ValueError, every other rank
dpcore.CommError naming that rank, blocking or async; nothing moves, and the communicator stays
usable, so the next collective is exact on every rank. The same on every transport.

Usage: mpiexec -n K python -m mpi4py refused.py
Prints 'rank R: refused KIND | EXCEPTION | MESSAGE' for every case, then 'rank R: ok (...)'.
"""
import re

import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, expect_transport, make_input, mpi_allgatherv, reference, say

world = MPI.COMM_WORLD
comm = dpcore.init(timeout=20)
rank, size = comm.rank, comm.size
check = Checker(rank)
expect_transport(comm, check)
i32 = np.dtype(np.int32)
SHARD = 5  # elements per rank: the output holds SHARD * size
ALGOS = ["auto", "ring", "one_shot"] + (["direct"] if comm.direct else [])


def gather(algo, extra=0, misplaced=False, async_op=False):
    """This rank's all_gather: out `extra` elements longer than the shards need, or the shard
    one element off its own place inside out."""
    shard = make_input(i32, "sum", SHARD, rank, size)
    out = np.zeros(SHARD * size + extra, i32)
    if misplaced:  # wholly inside out, one element after its place (the last rank: before)
        at = SHARD * rank + (1 if rank + 1 < size else -1)
        out[at:at + SHARD] = shard
        shard = out[at:at + SHARD]
    work = comm.all_gather(shard, out=out, algo=algo, async_op=async_op)
    return work.wait(20) if async_op else work


# kind: (the culprit's call, the others' call)
KINDS = {}
for algo in ALGOS:
    KINDS[f"{algo}, out one too long"] = (lambda a=algo: gather(a, extra=1),
                                          lambda a=algo: gather(a))
    KINDS[f"{algo}, out one too short"] = (lambda a=algo: gather(a, extra=-1),
                                           lambda a=algo: gather(a))
    if size > 1:  # alone, a shard inside out of its length can only be at its own place
        KINDS[f"{algo}, shard off its place in out"] = (lambda a=algo: gather(a, misplaced=True),
                                                        lambda a=algo: gather(a))
KINDS["async, out one too long"] = (lambda: gather("auto", extra=1, async_op=True),
                                    lambda: gather("auto", async_op=True))
KINDS["every rank's out one too long"] = (lambda: gather("ring", extra=1),
                                          lambda: gather("ring", extra=1))
# gather, scatter, all_to_all (the culprit is the root, or the rank whose buffer is wrong)
ones = lambda k: np.ones(k, np.int32)  # noqa: E731
KINDS["gather, the root's out one too long"] = (
    lambda: comm.gather(ones(SHARD), root=culprit, out=ones(SHARD * size + 1)),
    lambda: comm.gather(ones(SHARD), root=culprit))
KINDS["scatter, the root's x one too long"] = (
    lambda: comm.scatter(ones(SHARD * size + 1), ones(SHARD), root=culprit),
    lambda: comm.scatter(None, ones(SHARD), root=culprit))
if size > 1:  # the root is the next rank (its own out is checked before the call)
    KINDS["scatter from a list, an out one too long"] = (
        lambda: comm.scatter(None, ones(SHARD + 1), root=(culprit + 1) % size),
        lambda: comm.scatter([ones(SHARD)] * size if rank == (culprit + 1) % size else None,
                             ones(SHARD), root=(culprit + 1) % size))
KINDS["all_to_all, out one short of what the splits send"] = (
    lambda: comm.all_to_all(ones(SHARD * size), splits=[SHARD] * size, out=ones(SHARD * size - 1)),
    lambda: comm.all_to_all(ones(SHARD * size), splits=[SHARD] * size))


def refused(kind, call, expected):
    """call() must raise `expected`; returns its message."""
    try:
        call()
        check.true(False, f"{kind}: no exception on rank {rank} (expected {expected.__name__})")
    except dpcore.CommError as e:
        say(rank, f"refused {kind} | CommError | {e}")
        check.true(expected is dpcore.CommError,
                   f"{kind}: CommError on rank {rank} (expected {expected.__name__}): {e}")
        return str(e)
    except ValueError as e:
        say(rank, f"refused {kind} | ValueError | {e}")
        check.true(expected is ValueError,
                   f"{kind}: ValueError on rank {rank} (expected {expected.__name__}): {e}")
        return str(e)
    except Exception as e:
        check.true(False, f"{kind}: {type(e).__name__} on rank {rank}: {e}")
    return ""


for k, (kind, (bad, good)) in enumerate(KINDS.items()):
    culprit = k % size
    everyone = kind.startswith("every rank")
    at_fault = everyone or rank == culprit
    message = refused(kind, bad if at_fault else good,
                      ValueError if at_fault else dpcore.CommError)
    check.true(re.match(r"dpcore \w+ #\d+ on rank \d+: ", message) is not None,
               f"{kind}: message does not name the call: {message}")
    if not at_fault:
        check.true(f"rank {culprit}" in message, f"{kind}: does not name rank {culprit}: {message}")
    # the communicator stays usable: the next collectives are exact on every rank
    x = make_input(i32, "sum", 1009 + k, rank, size)
    every = [make_input(i32, "sum", 1009 + k, r, size) for r in range(size)]
    try:
        check.equal(comm.all_reduce(x), reference("sum", every), f"all_reduce after '{kind}'")
        shard = make_input(i32, "sum", SHARD + rank, rank, size)
        check.equal(comm.all_gather(shard, out=np.zeros(sum(SHARD + r for r in range(size)), i32)),
                    mpi_allgatherv(world, shard), f"all_gather after '{kind}'")
    except dpcore.CommError as e:
        check.true(False, f"after '{kind}' the communicator was unusable: {e}")
        comm = dpcore.init(timeout=20)

comm.close()
check.finish()
