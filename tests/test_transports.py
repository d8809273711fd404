"""What differs between the transports (transport_configs.py): which one a communicator
chooses, the path its all_reduce takes, and async calls that progress on their own while their
rank computes. Their correctness is test_collectives.py's and test_faults.py's, on every
transport alike."""
import pytest

from mpi_helpers import rank_lines, run_ok
from transport_configs import BETWEEN_NODES, CONFIGS

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("config", BETWEEN_NODES.values(), ids=BETWEEN_NODES)
def test_transport_and_all_reduce_path(config):
    """DPCORE_TRANSPORT=mpi runs every collective over MPI; virtual nodes take the hierarchical
    all_reduce where they are of one size and hold more than one rank, else the flat ring."""
    n = config.ranks
    output = run_ok("transport_path.py", n, config.transport, config.path, env=config.env)
    assert rank_lines(output, "transport") == {
        r: f"{config.transport} path {config.path}" for r in range(n)}


ASYNC = {k: c for k, c in CONFIGS.items() if k in ("shm-2", "mpi-2", "nodes-of-2-x2")}


@pytest.mark.parametrize("config", ASYNC.values(), ids=ASYNC)
def test_async_progresses_without_polling(config):
    """An async collective completes while its rank sleeps; wait(timeout) gives up while a peer
    is late, and the call completes later."""
    run_ok("transport_async.py", config.ranks, env=config.env)
