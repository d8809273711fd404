"""Run under `mpiexec -n K python -m mpi4py ddp_equiv.py [MODULE]`: K ranks training on slices of
each batch end with the parameters of one process training on the whole batch (each rank also
runs that one-process reference itself, so every rank checks). Prints "OK <case>" per case.
MODULE (numpy, strict or cupy: tests/array_modules.py) holds the model, the data and so every
array the collectives get; the results are compared on the host.

The model has a parameter that forward never uses: data parallelism treats its gradient as zeros
(never waits for it), so the reference gives it zero gradients too.
"""
import sys
from pathlib import Path

import numpy as np

import dpcore
import dpcore.nn as nn
import dpcore.nn.functional as F
import dpcore.optim as optim
from dpcore.parallel import DataParallel, DistributedSampler
from dpcore.tensor import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: array_modules, strict_xp
from array_modules import host, module  # noqa: E402


class Net(nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 32, dtype=dtype), nn.GELU(),
                                  nn.LayerNorm(32, dtype=dtype), nn.Linear(32, 32, dtype=dtype),
                                  nn.ReLU())
        self.unused = nn.Linear(32, 3, dtype=dtype)  # mid-way in parameter order: blocks a bucket
        self.head = nn.Linear(32, 4, dtype=dtype)

    def forward(self, x):
        return self.head(self.body(x))


def make(dtype, seed, xp=np):
    nn.manual_seed(seed)
    return Net(dtype).to(xp=xp)


def data(n, dtype, seed=5, xp=np):
    rng = np.random.default_rng(seed)
    return xp.asarray(rng.standard_normal((n, 6)).astype(dtype)), xp.asarray(rng.integers(0, 4, n))


def reference(dtype, opt_cls, kwargs, batches, xp):
    """One process, whole batches; gradients start as zeros so the unused one stays zeros."""
    model = make(dtype, seed=0, xp=xp)
    for p in model.parameters():
        p.grad = xp.zeros_like(p.data)
    opt = opt_cls(model.parameters(), **kwargs)
    for x, y in batches:
        model.zero_grad(set_to_none=False)
        F.cross_entropy(model(Tensor(x)), y).backward()
        opt.step()
    return model.state_dict()


def check(comm, case, engine, expected, tol):
    got = engine.state_dict()
    for name, value in expected.items():
        assert type(got[name]) is type(value), f"{case}: {name} is a {type(got[name])}"
        np.testing.assert_allclose(host(got[name]), host(value), rtol=tol, atol=tol,
                                   err_msg=f"{case}: {name}")
    flat = engine.flat.data
    hi, lo = comm.all_reduce(flat, op="max"), comm.all_reduce(flat, op="min")
    assert np.array_equal(host(hi), host(lo)), f"{case}: ranks disagree"
    if comm.rank == 0:
        print("OK", case, flush=True)


def even_batches(comm, xp, case, dtype, opt_cls, kwargs, tol, steps=4, batch=12,
                 **engine_kwargs):
    """batch divisible by every K tested (1..4): each rank takes batch / K samples, mean loss."""
    x, y = data(steps * batch, dtype, xp=xp)
    batches = [(x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]) for s in range(steps)]
    expected = reference(dtype, opt_cls, kwargs, batches, xp)
    # rank r != 0 starts from other parameters: the broadcast at construction must fix that
    engine = DataParallel(make(dtype, seed=comm.rank, xp=xp), comm, optimizer=opt_cls, **kwargs,
                          **engine_kwargs)
    assert len(engine.buckets) > 1 or engine_kwargs.get("bucket_cap_mb", 25) >= 1
    per = batch // comm.size
    for xb, yb in batches:
        lo, hi = comm.rank * per, (comm.rank + 1) * per
        loss = F.cross_entropy(engine(Tensor(xb[lo:hi])), yb[lo:hi])
        loss.backward()
        if engine.overlap:  # every bucket was launched during backward, the unused one too
            assert engine.launcher.next == len(engine.buckets), case
        engine.step()
        engine.zero_grad()
    check(comm, case, engine, expected, tol)


def uneven_batches(comm, xp, dtype, tol):
    """batch 10 on K ranks (4+3+3, 3+3+2+2, ...) via the sampler: summed loss x K / 10."""
    x, y = data(30, dtype, xp=xp)
    sampler = DistributedSampler(30, 10, comm.rank, comm.size, seed=3)
    whole = DistributedSampler(30, 10, seed=3)
    kwargs = dict(lr=0.01, weight_decay=0.05)
    expected = reference(dtype, optim.AdamW, kwargs,
                         [(x[xp.asarray(i)], y[xp.asarray(i)]) for i, _ in whole], xp)
    engine = DataParallel(make(dtype, seed=comm.rank, xp=xp), comm, optimizer=optim.AdamW,
                          bucket_cap_mb=0.002, **kwargs)
    for local, total in sampler:
        local = xp.asarray(local)  # the sampler's indices live on the host
        loss = F.cross_entropy(engine(Tensor(x[local])), y[local], reduction="sum")
        (loss * (comm.size / total)).backward()
        engine.step()
        engine.zero_grad()
    check(comm, "uneven batches, sampler", engine, expected, tol)


def accumulation(comm, xp, dtype, tol):
    """Two micro-batches per step, the first backward inside no_sync: same as the whole batch."""
    x, y = data(48, dtype, xp=xp)
    kwargs = dict(lr=0.05, momentum=0.9)
    expected = reference(dtype, optim.SGD, kwargs, [(x[:24], y[:24]), (x[24:], y[24:])], xp)
    engine = DataParallel(make(dtype, seed=comm.rank, xp=xp), comm, optimizer=optim.SGD,
                          bucket_cap_mb=0.002, **kwargs)
    for step in range(2):
        for micro in range(2):
            lo = step * 24 + micro * 12
            mine = xp.asarray(np.array_split(np.arange(lo, lo + 12), comm.size)[comm.rank])
            loss = F.cross_entropy(engine(Tensor(x[mine])), y[mine], reduction="sum")
            loss = loss * (comm.size / 24)
            if micro == 0:
                with engine.no_sync():
                    loss.backward()
                assert engine.launcher.works == []  # nothing was sent
            else:
                loss.backward()
        engine.step()
        engine.zero_grad()
    check(comm, "no_sync accumulation", engine, expected, tol)


def main():
    comm = dpcore.init()
    xp = module(sys.argv[1] if len(sys.argv) > 1 else "numpy", comm.local_rank)
    f64, f32 = 1e-10, 1e-5
    adamw = dict(lr=0.01, betas=(0.9, 0.99), weight_decay=0.1)
    sgd = dict(lr=0.1, momentum=0.9, weight_decay=0.01)
    even_batches(comm, xp, "float64 AdamW, small buckets", np.float64, optim.AdamW, adamw, f64,
                 bucket_cap_mb=0.002)
    even_batches(comm, xp, "float32 SGD momentum, one bucket", np.float32, optim.SGD, sgd, f32)
    even_batches(comm, xp, "float64 SGD, no overlap", np.float64, optim.SGD, sgd, f64,
                 bucket_cap_mb=0.002, overlap=False)
    uneven_batches(comm, xp, np.float64, f64)
    accumulation(comm, xp, np.float64, f64)
    comm.close()


if __name__ == "__main__":
    sys.exit(main())
