"""Run under `mpiexec -n K python -m mpi4py zero_equiv.py [MODULE]`: ZeRO stages 1, 2 and 3 train
the same parameters as stage 0 (AdamW, uneven local batches, buckets and units that split
unevenly over K ranks, a parameter forward never uses, a step with no_sync accumulation), the
memory and traffic ledger matches the ZeRO paper's formulas, and so does mixed precision
(float16 with a loss scale, bfloat16). MODULE (numpy, strict or cupy: tests/array_modules.py)
holds the models and the data; results are compared on the host. Each rank ends with
'rank R: ok'.
"""
import sys

import numpy as np

import dpcore
import dpcore.nn as nn
import dpcore.nn.functional as F
import dpcore.optim as optim
from dpcore.parallel import DataParallel, DistributedSampler
from dpcore.parallel.ledger import paper_formulas
from dpcore.parallel.mixed import low_dtype
from dpcore.tensor import Tensor
from checks import say
from ddp_equiv import data, make  # puts tests/ on the path: array_modules, strict_xp
from array_modules import host, module  # noqa: I100

ADAMW = dict(lr=0.01, betas=(0.9, 0.99), weight_decay=0.1)


def train(comm, xp, stage, dtype, steps=4, **kwargs):
    """steps of batch 10 through the sampler (4+3+3 on 3 ranks ...), then one step of two
    micro-batches with the first backward inside no_sync."""
    x, y = data(10 * steps + 20, dtype, xp=xp)
    engine = DataParallel(make(dtype, seed=comm.rank, xp=xp), comm, zero_stage=stage,
                          optimizer=optim.AdamW, **ADAMW, **kwargs)
    for b, (local, total) in enumerate(DistributedSampler(10 * steps, 10, comm.rank, comm.size,
                                                          seed=3)):
        local = xp.asarray(local)
        loss = F.cross_entropy(engine(Tensor(x[local])), y[local], reduction="sum")
        (loss * (comm.size / total)).backward()
        engine.step()
        engine.zero_grad()
    for micro in range(2):
        lo = 10 * steps + 10 * micro
        mine = xp.asarray(np.array_split(np.arange(lo, lo + 10), comm.size)[comm.rank])
        loss = F.cross_entropy(engine(Tensor(x[mine])), y[mine], reduction="sum")
        loss = loss * (comm.size / 20)
        if micro == 0:
            with engine.no_sync():
                loss.backward()
        else:
            loss.backward()
    engine.step()
    engine.zero_grad()
    return engine


class Tied(nn.Module):
    """Stage 3's awkward cases: the root owns a parameter and has children (its unit stays
    gathered through theirs), a module runs twice, and the output layer's weight is the
    embedding's (a unit that two modules need)."""

    def __init__(self, dtype):
        super().__init__()
        self.emb = nn.Embedding(10, 8, dtype=dtype)
        self.scale = nn.Parameter(np.linspace(0.5, 1.5, 8).astype(dtype))
        self.proj = nn.Linear(8, 8, dtype=dtype)
        self.out = nn.Linear(8, 10, dtype=dtype)
        self.out.weight = self.emb.weight

    def forward(self, ids):
        h = self.proj(self.emb(ids) * self.scale).relu()
        return self.out(self.proj(h))


def tied(comm, xp, dtype, tol):
    ids = xp.asarray(np.random.default_rng(2).integers(0, 10, (3, 12)))
    y = xp.asarray(np.arange(12) % 10)
    results = []
    for stage, kwargs in [(0, {}), (1, {}), (2, {}), (3, {}), (3, dict(prefetch=False))]:
        nn.manual_seed(4)
        engine = DataParallel(Tied(dtype).to(xp=xp), comm, zero_stage=stage, bucket_cap_mb=0.0002,
                              **ADAMW, **kwargs)
        for step in range(3):
            mine = xp.asarray(np.array_split(np.arange(12), comm.size)[comm.rank])
            F.cross_entropy(engine(Tensor(ids[step][mine])), y[mine]).backward()
            engine.step()
            engine.zero_grad()
        if stage == 3:  # 4 units (root, emb, proj, out's bias), all given back after the step
            units = engine.param_store.gathered
            assert len(units) == 4 and not any(u.resident for u in units)
        results.append(engine.state_dict())
    for got in results[1:]:
        for name, value in results[0].items():
            np.testing.assert_allclose(host(got[name]), host(value), rtol=tol, atol=tol,
                                       err_msg=name)


def same_on_every_rank(comm, state, what):
    for name, value in state.items():
        assert value.flags.c_contiguous, f"{what}: {name} is a copy, whole"
        flat = value.ravel()  # of the state's module: the collectives get the trainer's arrays
        hi, lo = comm.all_reduce(flat, op="max"), comm.all_reduce(flat, op="min")
        assert np.array_equal(host(hi), host(lo)), f"{what}: ranks disagree on {name}"


def equivalence(comm, xp, dtype, tol):
    expected = train(comm, xp, 0, dtype, bucket_cap_mb=0.002).state_dict()
    for stage in (1, 2, 3):
        for kwargs in (dict(bucket_cap_mb=0.002), dict(bucket_cap_mb=25, overlap=False)):
            engine = train(comm, xp, stage, dtype, **kwargs)
            got = engine.state_dict()
            what = f"stage {stage} {np.dtype(dtype).name} {kwargs}"
            assert got.keys() == expected.keys(), what
            for name, value in expected.items():
                assert type(got[name]) is type(value), f"{what}: {name} is a {type(got[name])}"
                np.testing.assert_allclose(host(got[name]), host(value), rtol=tol, atol=tol,
                                           err_msg=f"{what}: {name}")
            same_on_every_rank(comm, got, what)


def mlp(seed=0, xp=np):
    nn.manual_seed(seed)
    return nn.Sequential(nn.Linear(40, 96), nn.ReLU(), nn.Linear(96, 96), nn.ReLU(),
                         nn.Linear(96, 10)).to(xp=xp)


def kept_units(engine):
    """Bytes of stage 3's gathered units that cannot give their memory back (CuPy's:
    gathered.py): held beyond the paper's shard."""
    units = getattr(engine.param_store, "gathered", [])
    return sum(unit.data.nbytes for unit in units if not unit.releasable)


def ledger(comm, xp, tol=0.02):
    """Bytes held after a step and bytes sent in it, against the paper (fp32 Adam)."""
    rng = np.random.default_rng(0)
    x = xp.asarray(rng.standard_normal((12, 40)).astype(np.float32))
    y = xp.asarray(rng.integers(0, 10, 12))
    mine = xp.asarray(np.array_split(np.arange(12), comm.size)[comm.rank])
    report = []
    for stage in (0, 1, 2, 3):
        engine = DataParallel(mlp(xp=xp), comm, zero_stage=stage, bucket_cap_mb=0.01, lr=1e-3)
        for _ in range(2):
            F.cross_entropy(engine(Tensor(x[mine])), y[mine]).backward()
            engine.step()
            engine.zero_grad()
        psi = engine.flat.count
        formula = paper_formulas(psi, comm.size, stage, "fp32")
        formula["params"] += kept_units(engine)
        formula["total"] += kept_units(engine)
        measured = engine.memory()
        measured["sent_per_step"] = sum(engine.sent_per_step().values())
        for key in ("params", "grads", "optimizer", "total", "sent_per_step"):
            m, f = measured[key], formula[key]
            assert abs(m - f) <= tol * f, f"stage {stage}, {key}: measured {m}, paper {f}"
        report.append(f"s{stage} {measured['total']}/{formula['total']:.0f}")
    return " ".join(report)


def mixed(comm, xp, name, tol=4e-3):
    """2-byte parameters and gradients, float32 masters: every stage ends where stage 0 does,
    the ledger shows the paper's 2 + 2 + 12 bytes per parameter (sharded as at each stage), and
    a float16 step whose scaled gradients overflow is skipped on every rank."""
    rng = np.random.default_rng(1)
    x = xp.asarray(rng.standard_normal((12, 40)).astype(np.float32))
    y = xp.asarray(rng.integers(0, 10, 12))
    mine = xp.asarray(np.array_split(np.arange(12), comm.size)[comm.rank])
    results = {}
    for stage in (0, 1, 2, 3):
        engine = DataParallel(mlp(xp=xp), comm, zero_stage=stage, bucket_cap_mb=0.01, lr=1e-2,
                              mixed_precision=name)
        start = {k: host(v) for k, v in engine.state_dict().items()}
        for _ in range(3):
            engine.scale_loss(F.cross_entropy(engine(Tensor(x[mine])), y[mine])).backward()
            engine.step()
            engine.zero_grad()
        psi, measured = engine.flat.count, engine.memory()
        measured["sent_per_step"] = sum(engine.sent_per_step().values())
        formula = paper_formulas(psi, comm.size, stage, "mixed")
        formula["params"] += kept_units(engine)
        formula["total"] += kept_units(engine)
        for key in ("params", "grads", "optimizer", "total", "sent_per_step"):
            m, f = measured[key], formula[key]
            assert abs(m - f) <= 0.02 * f, f"{name} stage {stage} {key}: {m} vs paper {f}"
        results[stage] = state = {k: host(v) for k, v in engine.state_dict().items()}
        assert all(state[k].dtype.itemsize == 2 for k in state)
        assert any(not np.array_equal(state[k], start[k]) for k in state), "nothing trained"
        if name == "float16":  # a scale so large that the gradients overflow: skip the step
            engine.mixed.scale = scale = 2.0 ** 40
            with np.errstate(over="ignore", invalid="ignore"):
                engine.scale_loss(F.cross_entropy(engine(Tensor(x[mine])), y[mine])).backward()
            engine.step()
            engine.zero_grad()
            assert engine.mixed.skipped == 1 and engine.mixed.scale == scale / 2
            after = engine.state_dict()
            assert all(np.array_equal(host(after[k]), state[k]) for k in state), \
                "skipped step moved"
    # Stages reduce in other orders (buckets differ; so do transports): a 2-byte gradient near 0
    # may round the other way, and Adam's m / sqrt(v) makes that a move of up to 2 lr. So: few
    # elements beyond a few ulps, none beyond 2 lr per step; exactness is float32/64's test.
    for stage in (1, 2, 3):
        for k, value in results[0].items():
            diff = np.abs(results[stage][k].astype(np.float32) - value.astype(np.float32))
            few = (diff > tol).sum() <= max(2, 0.01 * diff.size)
            assert few and diff.max() <= 2 * 1e-2 * 3, \
                f"{name} stage {stage} {k}: {(diff > tol).sum()} differ, max {diff.max()}"


def supports(xp, dtype):
    """Whether module xp has arrays of `dtype` (CuPy's bfloat16 is recent)."""
    try:
        xp.zeros(1, dtype) + 1
    except (TypeError, ValueError, NotImplementedError):
        return False
    return True


def main():
    comm = dpcore.init()
    xp = module(sys.argv[1] if len(sys.argv) > 1 else "numpy", comm.local_rank)
    equivalence(comm, xp, np.float64, 1e-10)
    equivalence(comm, xp, np.float32, 1e-5)
    tied(comm, xp, np.float64, 1e-10)
    mixed(comm, xp, "float16")
    if supports(xp, low_dtype("bfloat16")):
        mixed(comm, xp, "bfloat16")
    elif comm.rank == 0:
        print(f"bfloat16 not run: {xp.__name__} has no bfloat16 arrays here", flush=True)
    summary = ledger(comm, xp)
    if comm.rank == 0:
        print(f"total bytes held / paper: {summary}", flush=True)
    comm.barrier()
    say(comm.rank, "ok")
    comm.close()


if __name__ == "__main__":
    sys.exit(main())
