"""Exact results of every collective on every transport (transport_configs.py), checked
against MPI's own collectives and NumPy. Each test is one mpiexec launch of a script in
tests/scripts/ that runs thousands of checks and lists every mismatch it finds. Shared memory
at 2 and 3 ranks runs the whole matrix; 1 and 4 ranks, and the transports between nodes, whose
every call is slower here, run a sample of dtype x op pairs (and counts up to 100003 between
nodes)."""
import pytest

from mpi_helpers import run_ok
from transport_configs import CONFIGS, EACH_PATH

pytestmark = pytest.mark.mpi


def matrix_args(config):
    """The scripts' MAX_COUNT and case set for this transport. Every dtype x op (each its own
    loop) runs at 2 and 3 ranks; 1 and 4 ranks take other paths through the same loops, so a
    sample of them covers those paths (4 ranks sharing 2 cores cost the most here)."""
    if not config.shm:
        return 100_003, "few"
    return "all", "all" if config.ranks in (2, 3) else "few"


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS)
def test_all_reduce_and_reduce_scatter(config):
    """Every dtype x op x algorithm, counts 0, 1, primes, uneven and several ring segments long;
    in place, N-D input, and all_gather(reduce_scatter(x)) == all_reduce(x).ravel(); reduce to
    every root too."""
    run_ok("reductions.py", config.ranks, *matrix_args(config), env=config.env)


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS)
def test_all_gather_broadcast_and_barrier(config):
    """Uneven and empty shards with and without out=, in place; broadcast from every root."""
    run_ok("gather_broadcast.py", config.ranks, *matrix_args(config), env=config.env)


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS)
def test_gather_scatter_and_all_to_all(config):
    """Every root and algorithm, uneven and empty shards and splits, out= or not, gather in
    place, learned out_splits, async, N-D input."""
    run_ok("exchange.py", config.ranks, *matrix_args(config), env=config.env)


def test_exchanges_where_ranks_may_not_read_each_other():
    """Where process_vm_readv is refused (a container's default seccomp; DPCORE_READ_PEERS=0
    runs as if), gather, scatter and all_to_all still run at every size: past one_shot's slot
    each input passes through it in rounds (a 4 KiB slot: many rounds a call)."""
    run_ok("exchange.py", 3, 100000, "few",
           env={"DPCORE_READ_PEERS": "0", "DPCORE_ONE_SHOT_BYTES": "4096"})


@pytest.mark.parametrize("n", [3, 4])
def test_exchange_rounds_take_every_window_before_it_is_overwritten(n):
    """Rounds through two slots a rank, taken in turn: a rank that rewrote a slot before every
    peer took its window (one window ahead), or left the last round in the slot the next call's
    one_shot payload fills, shows as wrong elements within 60 calls of several rounds, at
    uneven splits and shards (seen failing both ways on deliberately broken builds)."""
    run_ok("exchange_rounds.py", n, 60,
           env={"DPCORE_READ_PEERS": "0", "DPCORE_ONE_SHOT_BYTES": "4096"})


TINY = {k: c for k, c in EACH_PATH.items() if k in ("shm-2", "shm-3", "mpi-3")}


@pytest.mark.parametrize("config", TINY.values(), ids=TINY)
def test_with_tiny_ring_segments(config):
    """The same checks (counts up to 20000) with 1000-byte slots (not a power of two) and only
    two of them: dozens of ring rounds per call, the tightest flow control. A sample of dtype x
    op pairs: the flow control is the same for each, and every pair runs in the tests above."""
    env = {**config.env, "DPCORE_SLOT_BYTES": "1000", "DPCORE_FIFO_SLOTS": "2"}
    run_ok("reductions.py", config.ranks, 20000, "few", env=env)
    run_ok("gather_broadcast.py", config.ranks, 20000, "few", env=env)


@pytest.mark.parametrize("config", EACH_PATH.values(), ids=EACH_PATH)
def test_async_ops_complete_in_order(config):
    """Several async collectives in flight, waited for in reverse; done(); a blocking call
    queued behind async ones on the same buffer."""
    run_ok("async_ops.py", config.ranks, env=config.env)


@pytest.mark.parametrize("n", [1, 3, 4])
def test_several_communicators_interleaved(n):
    """COMM_WORLD twice and a renumbered Split of it, collectives interleaved, blocking and
    async; close() and the context manager."""
    run_ok("communicators.py", n)
