"""Data parallelism: K ranks (mpiexec -n K, K = 1..4) train the model one process trains; each ZeRO
stage, run here as rank 0 of four that agree, holds and sends what the stage shards. Both on
NumPy, on strict_xp (tests/strict_xp.py: where NumPy-only code would fail on a GPU) and on CuPy
where a GPU is usable."""
import re

import numpy as np
import pytest

import dpcore.nn as nn
import dpcore.nn.functional as F
from dpcore.parallel import DataParallel, DistributedSampler
from dpcore.sharding import shard_range
from dpcore.tensor import Tensor
from array_modules import module_or_skip
from dpcore.comm.work import DoneWork
from mpi_helpers import run_script

# one BLAS thread per rank: the machine has 2 cores and the tests run up to 4 ranks
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


@pytest.mark.mpi
@pytest.mark.parametrize("module, k", [
    ("numpy", 1), ("numpy", 2), ("numpy", 3), ("numpy", 4), ("strict", 2),
    pytest.param("cupy", 1, marks=pytest.mark.gpu), pytest.param("cupy", 2, marks=pytest.mark.gpu)])
def test_k_ranks_equal_one_process(module, k):
    module_or_skip(module)  # strict_xp: any NumPy-only path fails as it would on a GPU
    _, out = run_script("ddp_equiv.py", k, module, env=ONE_THREAD)
    assert out.count("OK ") == 5, out


@pytest.mark.mpi
def test_k_ranks_equal_one_process_through_the_device_transport():
    """strict_xp arrays under DPCORE_CUDA_EMULATION=1 pass for CUDA arrays: DataParallel's
    buckets then go through the device transport (its CPU emulation), as CuPy's on a GPU."""
    _, out = run_script("ddp_equiv.py", 2, "strict",
                        env={**ONE_THREAD, "DPCORE_CUDA_EMULATION": "1"})
    assert out.count("OK ") == 5, out


@pytest.mark.mpi
def test_train_command_same_curve_for_any_rank_count():
    curves = {}
    for k in (1, 2):
        _, out = run_script("ddp_train.py", k, "--epochs", "2", "--batch-size", "50",
                            env=ONE_THREAD)
        curves[k] = re.findall(r"epoch +\d+  loss (\S+)\s+test acc (\S+)", out)
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


class OneOfFour:
    """Rank 0 of 4 whose peers hold the same numbers as it does: a communicator that needs no
    peers (the average of equal values is the value), so an engine builds and steps here. It
    notes the module of every array it is given (`modules`)."""
    rank, size = 0, 4

    def __init__(self):
        self.modules = set()

    def _saw(self, *arrays):
        self.modules.update(type(a).__module__.split(".")[0] for a in arrays if a is not None)

    def broadcast(self, x, root=0):
        self._saw(x)
        return x

    def all_reduce(self, x, op="sum", out=None, async_op=False):
        self._saw(x, out)
        out = x.copy() if out is None else out
        out[...] = x
        return DoneWork(out) if async_op else out

    def reduce_scatter(self, x, op="sum", out=None, async_op=False):
        self._saw(x, out)
        lo, hi = shard_range(x.size, self.size, self.rank)
        out[...] = x.ravel()[lo:hi].copy()
        return DoneWork(out) if async_op else out

    def all_gather(self, s, out=None, async_op=False):
        self._saw(s, out)
        out[:s.size] = s  # rank 0's chunk comes first; the peers' chunks stay as they were
        return DoneWork(out) if async_op else out


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_each_stage_holds_and_sends_what_it_shards(stage, xp):
    nn.manual_seed(0)
    # psi = 56 float32 parameters in units of 36 and 20 (one bucket of 56 at stages 0-2): every
    # bucket and unit splits evenly over 4 ranks, so the bytes are exact
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 4)).to(xp=xp)
    comm = OneOfFour()
    engine = DataParallel(model, comm, zero_stage=stage)
    x = xp.asarray(np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32))
    F.cross_entropy(engine(Tensor(x)), xp.asarray([0, 1, 2])).backward()
    engine.step()
    engine.zero_grad()
    assert comm.modules == {xp.__name__}, "every collective gets the trainer's own arrays"
    psi = 56 * 4  # bytes of one full copy
    # a gathered unit that cannot give its memory back (CuPy's: gathered.py) stays held
    kept = sum(u.data.nbytes for u in getattr(engine.param_store, "gathered", [])
               if not u.releasable)
    held = {"params": (psi if stage < 3 else psi / 4) + kept,
            "grads": psi if stage < 2 else psi / 4,
            "optimizer": 2 * psi if stage == 0 else 2 * psi / 4}  # Adam: two moments
    assert {k: v for k, v in engine.memory().items() if k != "total"} == held
    ring = 3 / 4 * psi  # what each rank sends of a reduce-scatter or all-gather of the model
    sent = [{"all_reduce": 2 * ring}, {"reduce_scatter": ring, "all_gather": ring},
            {"reduce_scatter": ring, "all_gather": ring},
            {"reduce_scatter": ring, "all_gather": 2 * ring}][stage]  # stage 3: gathered twice
    assert engine.sent_per_step() == sent


def test_zero_stage_outside_0_to_3_is_refused():
    for bad in (4, -1, "1", None):
        with pytest.raises(ValueError, match="zero_stage"):
            DataParallel(nn.Linear(2, 2), comm=None, zero_stage=bad)
