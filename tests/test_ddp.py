"""Data parallelism: K ranks (mpiexec -n K, K = 1..4) train the model one process trains."""
import re

import pytest

from dpcore.parallel import DataParallel, DistributedSampler
from mpi_helpers import run_script

# one BLAS thread per rank: the machine has 2 cores and the tests run up to 4 ranks
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_k_ranks_equal_one_process(k):
    _, out = run_script("ddp_equiv.py", k, env=ONE_THREAD)
    assert out.count("OK ") == 5, out


def test_train_command_same_curve_for_any_rank_count():
    curves = {}
    for k in (1, 2):
        _, out = run_script("ddp_train.py", k, "--epochs", "2", "--batch-size", "50",
                            env=ONE_THREAD)
        curves[k] = re.findall(r"loss (\S+)\s+test acc (\S+)", out)
        assert len(curves[k]) == 2, out
    assert curves[1] == curves[2]


def test_sampler_splits_every_global_batch():
    n, batch = 23, 5
    one = [(idx.tolist(), total) for idx, total in DistributedSampler(n, batch, seed=7)]
    assert sorted(i for idx, _ in one for i in idx) == list(range(n))
    for size in (2, 3, 4, 6):
        per_rank = [list(DistributedSampler(n, batch, r, size, seed=7)) for r in range(size)]
        for b, (idx, total) in enumerate(one):
            assert [i for rank in per_rank for i in rank[b][0].tolist()] == idx
            assert all(rank[b][1] == total for rank in per_rank)
    s = DistributedSampler(n, batch, seed=7)
    s.set_epoch(1)
    assert [i.tolist() for i, _ in s] != [i for i, _ in one]
    assert len(DistributedSampler(n, batch, drop_last=True)) == 4


def test_zero_stage_picks_its_engine():
    import dpcore.nn as nn
    from dpcore.parallel.zero1 import ZeroStage1
    from dpcore.parallel.zero3 import ZeroStage3
    assert issubclass(ZeroStage3, ZeroStage1) and issubclass(ZeroStage1, DataParallel)
    with pytest.raises(ValueError, match="zero_stage"):
        DataParallel(nn.Linear(2, 2), comm=None, zero_stage=4)
