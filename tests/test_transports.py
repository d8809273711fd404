"""Async calls progress on their own while their rank computes: the worker thread runs them,
the same on every transport, and is checked here where MPI carries the data, which moves only
while someone polls it. The transports' correctness is test_collectives.py's and
test_faults.py's, on every transport alike (transport_configs.py); there the scripts also check
that each configuration runs the transport and all_reduce path it names."""
import pytest

from mpi_helpers import run_ok
from transport_configs import CONFIGS

pytestmark = pytest.mark.mpi


ASYNC = {k: c for k, c in CONFIGS.items() if k in ("mpi-2", "nodes-of-2-x2")}


@pytest.mark.parametrize("config", ASYNC.values(), ids=ASYNC)
def test_async_progresses_without_polling(config):
    """An async collective completes while its rank sleeps; wait(timeout) gives up while a peer
    is late, and the call completes later."""
    run_ok("transport_async.py", config.ranks, env=config.env)
