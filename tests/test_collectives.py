"""Exact results of every collective on 1 to 4 ranks (4 ranks oversubscribe a 2-core machine),
checked against MPI's own collectives and NumPy. Each test is one mpiexec launch of a script in
tests/scripts/ that runs thousands of checks and lists every mismatch it finds."""
import pytest

from mpi_helpers import run_ok

RANKS = [1, 2, 3, 4]


@pytest.mark.parametrize("n", RANKS)
def test_all_reduce_and_reduce_scatter(n):
    """Every dtype x op x algorithm, counts 0, 1, primes, uneven and several ring segments long;
    in place, N-D input, and all_gather(reduce_scatter(x)) == all_reduce(x).ravel()."""
    run_ok("reductions.py", n)


@pytest.mark.parametrize("n", RANKS)
def test_all_gather_broadcast_and_barrier(n):
    """Uneven and empty shards with and without out=, in place; broadcast from every root."""
    run_ok("gather_broadcast.py", n)


@pytest.mark.parametrize("n", [2, 3])
def test_with_tiny_ring_segments(n):
    """The same checks (counts up to 20000) with 1000-byte FIFO slots (not a multiple of 8
    bytes) and only two of them: dozens of ring rounds per call, the tightest flow control."""
    env = {"DPCORE_SLOT_BYTES": "1000", "DPCORE_FIFO_SLOTS": "2"}
    run_ok("reductions.py", n, 20000, env=env)
    run_ok("gather_broadcast.py", n, 20000, env=env)


@pytest.mark.parametrize("n", RANKS)
def test_async_ops_complete_in_order(n):
    """Several async collectives in flight, waited for in reverse; done(); a blocking call
    queued behind async ones on the same buffer."""
    run_ok("async_ops.py", n)


@pytest.mark.parametrize("n", [1, 3, 4])
def test_several_communicators_interleaved(n):
    """COMM_WORLD twice and a renumbered Split of it, collectives interleaved, blocking and
    async; close() and the context manager."""
    run_ok("communicators.py", n)

