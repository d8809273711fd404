"""examples/: each run as a user would (under mpiexec), its result checked against one process
computing the same thing (the example's own reference function, imported here)."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from mpi_helpers import run_mpi

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example(name):
    """examples/<name>.py as a module, for its one-process reference."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.mpi
def test_pipeline_parallel_trains_the_weights_one_process_trains(tmp_path):
    out = tmp_path / "weights.npz"
    args = ["--steps", "4", "--micro", "3", "--rows", "5", "--lr", "0.1"]
    _, output = run_mpi(2, [EXAMPLES / "pipeline_parallel.py", *args, "--out", out])
    assert "loss" in output and "the same weights as one process: bit for bit" in output, output
    want = example("pipeline_parallel").one_process(4, 3, 5, 0.1)
    got = np.load(out)
    assert sorted(got.files) == sorted(want)
    for name, value in want.items():
        assert np.array_equal(got[name], value), name
    # and training moved them: the check would pass on weights nobody trained
    first, second = example("pipeline_parallel").build()
    assert not np.array_equal(got["stage1.2.weight"], second[2].weight.data)


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_moe_dispatch_gives_what_one_process_gives(tmp_path, ranks):
    out = tmp_path / "moe.npy"
    _, output = run_mpi(ranks, [EXAMPLES / "moe_dispatch.py", "--out", out])
    assert "the same output as one process: exactly" in output, output
    moe = example("moe_dispatch")
    want = moe.one_process(ranks)
    assert np.array_equal(np.load(out), want)
    # uneven splits for real: the experts get different numbers of tokens from each rank
    counts = [np.bincount(moe.route(moe.tokens(r), ranks), minlength=ranks) for r in range(ranks)]
    assert len({c for row in counts for c in row}) > 1
