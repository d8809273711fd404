"""The backend started without mpiexec (as torchrun starts it): it must bootstrap through the
group's store, dpcore.init(store=, rank=, size=, timeout=), and say clearly when this dpcore
has no such keyword; one rank alone needs no launcher at all.

Usage: python torch_no_mpi.py DIR   (no mpiexec; DIR for the file stores)
"""
import inspect
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import dpcore
import dpcore.torch  # noqa: F401

for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
    assert v not in os.environ, f"run without mpiexec ({v} is set)"
where = sys.argv[1]
failures = []


class Called(Exception):
    pass


def fake_init(*args, **kwargs):  # stands in for the store bootstrap, which records its call
    raise Called(args, kwargs)


def start(name, size, **kwargs):
    dist.init_process_group("dpcore", init_method=f"file://{where}/{name}", rank=0,
                            world_size=size, **kwargs)


real_init = dpcore.init
has_store = "store" in inspect.signature(real_init).parameters
dpcore.init = fake_init
fake_init.__signature__ = inspect.signature(lambda mpi_comm=None, timeout=None, store=None,
                                            rank=None, size=None: None)
try:
    start("routed", 2, timeout=timedelta(seconds=7))
    failures.append("the group started without dpcore.init")
except Called as e:
    args, kwargs = e.args
    if args or set(kwargs) != {"store", "rank", "size", "timeout"} or kwargs["rank"] != 0 \
            or kwargs["size"] != 2 or kwargs["timeout"] != 7 \
            or not isinstance(kwargs["store"], dist.Store):
        failures.append(f"dpcore.init called with {args} {kwargs}")
dpcore.init = real_init

if not has_store:
    try:
        start("refused", 2)
        failures.append("a 2-rank group started without mpiexec or a store bootstrap")
    except RuntimeError as e:
        if "mpiexec" not in str(e) or "store" not in str(e):
            failures.append(f"unclear error: {e}")

start("alone", 1)  # one rank: dpcore's communicator of one, no launcher
t = torch.arange(4.0)
dist.all_reduce(t)
if not torch.equal(t, torch.arange(4.0)):
    failures.append(f"a 1-rank all_reduce gave {t}")
dist.destroy_process_group()
print("\n".join(f"FAIL {f}" for f in failures) or "ok")
sys.exit(1 if failures else 0)
