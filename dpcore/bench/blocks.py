"""Timing several calls against each other on a noisy machine: blocks of back-to-back calls,
alternating between the calls, so that a burst of noise from another process lands on one block
of each rather than on every block of one. benchmarks/auto_vs_fixed.py and
benchmarks/copy_floor.py compare this way, and the bench's --compare mpi alternates the
same way (ours, MPI, ours, ...)."""
import statistics
import time


def timed(mpi, call, iters):
    """Seconds per call of the slowest rank (a collective ends with its last rank) over `iters`
    back-to-back calls after a barrier. mpi: an mpi4py communicator."""
    from mpi4py import MPI

    mpi.Barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    return mpi.allreduce(time.perf_counter() - start, op=MPI.MAX) / max(iters, 1)


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
