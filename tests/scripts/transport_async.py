"""Async collectives progress on their own, on every transport: a rank that issues one and then
computes (never polling) does not hold up a peer waiting in a blocking call; Work.wait(timeout)
gives up with TimeoutError while a peer is late, and succeeds later; async calls after an idle
while still run.

Usage: mpiexec -n K python -m mpi4py transport_async.py   (K >= 2)
"""
import time

import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker

world = MPI.COMM_WORLD
comm = dpcore.init(timeout=60)
rank, size = comm.rank, comm.size
check = Checker(rank)
x = np.arange(100_003, dtype=np.float32)
want = x * size

# 1. Rank 0 issues async and sleeps; the others' blocking calls complete meanwhile.
world.Barrier()
if rank == 0:
    w = comm.all_reduce(x, async_op=True)
    time.sleep(1.5)  # computing, not polling
    check.true(w.done(), "async all_reduce done while its rank slept")
    check.equal(w.wait(), want, "async all_reduce issued before sleeping")
else:
    start = time.monotonic()
    check.equal(comm.all_reduce(x), want, "blocking all_reduce against a sleeping rank")
    elapsed = time.monotonic() - start
    check.true(elapsed < 1.0, f"blocking all_reduce took {elapsed:.2f} s: the sleeping rank's "
                              "async call did not progress on its own")

# 2. wait(timeout) while a peer is late: TimeoutError, not done; later it completes.
world.Barrier()
if rank == 0:
    w = comm.all_reduce(x, op="max", async_op=True)
    try:
        w.wait(timeout=0.2)
        check.true(False, "wait(timeout=0.2) returned while rank 1 was still away")
    except TimeoutError:
        check.true(not w.done(), "not done() after wait timed out")
    world.Barrier()  # now let rank 1 call
    check.equal(w.wait(timeout=30), x, "async all_reduce after a wait that timed out")
else:
    world.Barrier()
    check.equal(comm.all_reduce(x, op="max"), x, "late all_reduce")

# 3. After an idle while, async calls run as before.
time.sleep(1.0)
works = [comm.all_reduce(x[:k], async_op=True) for k in (5, 50_000, 7)]
for k, w in zip((5, 50_000, 7), works):
    check.equal(w.wait(timeout=30), want[:k], f"async all_reduce of {k} after an idle while")

comm.close()
check.finish()
