"""Without mpiexec, and the small pure-Python pieces: build_info(), shard_range() and the
algorithms the table lets a call ask for."""
import os

import numpy as np
import pytest

import dpcore
from mpi_helpers import run_python

SINGLE_RANK_PROGRAM = """
import numpy as np
import dpcore

with dpcore.init() as comm:
    assert (comm.rank, comm.size, comm.local_rank, comm.local_size) == (0, 1, 0, 1), comm
    assert comm.transport == "shm", comm.transport
    x = np.arange(10, dtype=np.float32)
    for algo in ["auto", "one_shot", "ring"]:
        for op in ["sum", "prod", "max", "min", "avg"]:
            assert np.array_equal(comm.all_reduce(x, op=op, algo=algo), x), (op, algo)
        assert np.array_equal(comm.reduce_scatter(x, algo=algo), x)
        assert np.array_equal(comm.all_gather(x[:3], algo=algo), x[:3])
        y = x.copy()
        assert comm.broadcast(y, algo=algo) is y and np.array_equal(y, x)
        assert np.array_equal(comm.reduce(x, algo=algo), x)
        y = x.copy()
        assert comm.reduce(y, out=y, algo=algo) is y and np.array_equal(y, x)
    y = x.copy()
    assert comm.all_reduce(y, out=y) is y and np.array_equal(y, x)
    assert np.array_equal(comm.all_reduce(x, async_op=True).wait(), x)
    comm.barrier()
print("single rank ok")
"""


def test_one_rank_without_mpiexec():
    """`python -c` with no launcher: dpcore.init() is a working 1-rank communicator."""
    launcher_env = {k: None for k in os.environ
                    if k.startswith(("PMI_", "PMIX_", "HYDRA_", "MPI_LOCALNRANKS", "OMPI_"))}
    _, output = run_python(["-c", SINGLE_RANK_PROGRAM], env=launcher_env)
    assert "single rank ok" in output


def test_an_algorithm_that_does_not_run_the_collective_is_refused_by_the_table():
    from dpcore.collectives import TABLE
    from dpcore.comm.choice import choose

    for coll, row in TABLE.items():
        for algo in {"ring", "one_shot", "direct"} - set(row.algorithms):
            with pytest.raises(ValueError, match=f"algo '{algo}' does not run {coll}; it runs"):
                choose(algo, coll, 8, None)


def test_build_info():
    info = dpcore.build_info()
    assert {"cuda", "cuda_archs", "cuda_available", "version"} <= set(info)
    assert isinstance(info["cuda"], bool) and isinstance(info["cuda_available"], bool)
    assert info["version"] == dpcore.__version__
    if not info["cuda"]:
        assert not info["cuda_available"], "a GPU cannot be usable without CUDA compiled in"


@pytest.mark.parametrize("size", range(1, 10))
def test_shard_range_is_numpy_array_split(size):
    for n in [0, 1, 2, 7, 8, 9, 10, 100, 101, 1009]:
        lengths = [len(piece) for piece in np.array_split(np.arange(n), size)]
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        want = [(int(bounds[r]), int(bounds[r + 1])) for r in range(size)]
        assert [dpcore.shard_range(n, size, r) for r in range(size)] == want, (n, size)


@pytest.mark.parametrize("n, size, rank", [(10, 0, 0), (10, 2, -1), (10, 2, 2), (10, -1, 0)])
def test_shard_range_rejects_bad_rank_or_size(n, size, rank):
    with pytest.raises(ValueError):
        dpcore.shard_range(n, size, rank)
