"""Timing several calls against each other on a noisy machine: blocks of back-to-back calls,
alternating between the calls, so that a burst of noise from another process lands on one block
of each rather than on every block of one. benchmarks/auto_vs_fixed.py and
benchmarks/copy_floor.py compare this way, and the bench's --compare mpi alternates the
same way (ours, MPI, ours, ...)."""
import statistics
import time


# nccl-tests' -a: how the ranks' times make a row's time
AVERAGES = {0: "rank 0's", 1: "the ranks' mean", 2: "the fastest rank's", 3: "the slowest rank's"}


def timed(mpi, call, iters, average=3, synchronize=None):
    """Seconds per call over `iters` back-to-back calls after a barrier; average: nccl-tests'
    -a (AVERAGES), by default the slowest rank's (a collective ends with its last rank).
    mpi: an mpi4py communicator. synchronize: for calls that return before a device has done
    their work, a function that waits for it: before the barrier, so that no earlier work is
    timed, and as the block's end."""
    return timed_block(mpi, call, iters, average, synchronize)[0]


def timed_block(mpi, call, iters, average=3, synchronize=None, agg=1, blocking=False):
    """timed() as nccl-tests' BenchTime times a row: (seconds per call, this rank's seconds per
    call until its last call returned, before synchronize: -C's CPU time). Each of the `iters`
    iterations makes `agg` calls (-m); blocking (-z): each call is waited for on every rank
    (synchronize, then a barrier) before the next, and the waits are timed."""
    from mpi4py import MPI

    if synchronize:
        synchronize()
    mpi.Barrier()
    calls = iters * agg
    start = time.perf_counter()
    for _ in range(calls):
        call()
        if blocking:
            if synchronize:
                synchronize()
            mpi.Barrier()
    cpu = time.perf_counter() - start
    if synchronize:
        synchronize()
    elapsed = time.perf_counter() - start
    if average == 0:
        elapsed = mpi.bcast(elapsed, root=0)
    else:
        op = {1: MPI.SUM, 2: MPI.MIN, 3: MPI.MAX}[average]
        elapsed = mpi.allreduce(elapsed, op=op) / (mpi.Get_size() if average == 1 else 1)
    return elapsed / max(calls, 1), cpu / max(calls, 1)


def block_iters(nbytes, block_seconds=0.05):
    """Calls per block of about block_seconds, guessing 5 GB/s or 2 us a call."""
    return max(3, int(block_seconds / max(nbytes / 5e9, 2e-6)))


def alternating_medians(mpi, calls, iters, blocks):
    """{name: median seconds per call} over `blocks` rounds of one block of each of
    calls = {name: fn}. Each block starts with one untimed call, which pays for whatever the
    previous block changed (an algorithm switch, a buffer pushed out of the cache)."""
    times = {name: [] for name in calls}
    for _ in range(blocks):
        for name, fn in calls.items():
            fn()
            times[name].append(timed(mpi, fn, iters))
    return {name: statistics.median(t) for name, t in times.items()}
