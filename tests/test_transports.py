"""The between-node transports on one machine: DPCORE_TRANSPORT=mpi (every collective over MPI
point-to-point) and DPCORE_NODE_SIZE=k (every k consecutive ranks a virtual node: shared memory
inside, MPI between). Each test launches `mpiexec -n K` on a script in tests/scripts/ that checks
exact results against mpi4py's own collectives, or the faults every rank must see."""
import re

import pytest

from mpi_helpers import rank_lines, run_ok

MPI_ONLY = {"DPCORE_TRANSPORT": "mpi"}


def node_size(k):
    return {"DPCORE_NODE_SIZE": str(k)}


# (ranks, environment, comm.transport, all_reduce path)
CONFIGS = {
    "mpi-1": (1, MPI_ONLY, "mpi", "flat"),
    "mpi-2": (2, MPI_ONLY, "mpi", "flat"),
    "mpi-3": (3, MPI_ONLY, "mpi", "flat"),
    "mpi-4": (4, MPI_ONLY, "mpi", "flat"),
    "nodes-of-1-x2": (2, node_size(1), "shm+mpi", "flat"),  # one rank per node: the flat ring
    "nodes-of-1-x3": (3, node_size(1), "shm+mpi", "flat"),
    "nodes-of-2-uneven": (3, node_size(2), "shm+mpi", "flat"),  # nodes of 2 and 1: fallback
    "nodes-of-2-x2": (4, node_size(2), "shm+mpi", "hierarchical"),
}


@pytest.mark.parametrize("config", CONFIGS)
def test_collectives_match_mpi(config):
    """all_reduce, reduce_scatter, all_gather, broadcast, barrier: float16/bfloat16/float32/
    float64/int8/int32/int64 with sum, prod, max, min, avg; counts 0, 1, 7, 100003; both
    algorithms; in place; uneven shards; every root; async completing in issue order."""
    n, env, transport, path = CONFIGS[config]
    output = run_ok("transport_collectives.py", n, transport, path, env=env)
    assert rank_lines(output, "transport") == {r: f"{transport} path {path}" for r in range(n)}


@pytest.mark.parametrize("config", ["mpi-1", "mpi-3", "nodes-of-2-x2"])
def test_mismatch_and_timeout_raise_on_every_rank(config):
    """Calls that differ in collective, count, dtype, op, root or all_gather output size (blocking
    and async) raise CommError on every rank, in the shared-memory path's message format; a rank
    that never arrives is named by the others' CommError once the timeout runs out."""
    n, env, _, _ = CONFIGS[config]
    output = run_ok("transport_faults.py", n, env=env)
    kinds = {}  # kind of fault: the ranks that reported it
    for r, kind in re.findall(r"^rank (\d+): error (.+?) \| ", output, re.MULTILINE):
        kinds.setdefault(kind, set()).add(int(r))
    assert kinds["all_gather out too long"] == set(range(n)), output
    if n > 1:
        for kind in ["collective", "count", "ring count", "dtype", "op", "root", "async count"]:
            assert kinds[kind] == set(range(n)), (kind, output)
        assert kinds["timeout"] == set(range(1, n)), output  # rank 0 is the one that never came


@pytest.mark.parametrize("config", ["mpi-2", "nodes-of-2-x2"])
def test_async_progresses_without_polling(config):
    """An async collective completes while its rank sleeps; wait(timeout) gives up while a peer
    is late; the background thread ends when idle and restarts."""
    n, env, _, _ = CONFIGS[config]
    run_ok("transport_async.py", n, env=env)
