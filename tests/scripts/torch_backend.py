"""The torch.distributed backend "dpcore" under mpiexec, against gloo in the same job: every
collective torch routes to a backend (torch_collectives.py, torch_exchanges.py), DDP and FSDP
(torch_training.py), and errors: a mismatched call raises dpcore.CommError on every rank, from
the call, from Work.wait(), from the future and from DDP's backward().

Usage: mpiexec -n K python -m mpi4py torch_backend.py env|tcp|file
(tcp and file give torch ranks the reverse of MPI's)
"""
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from mpi4py import MPI

import torch_collectives as coll
import torch_exchanges as exch
import torch_training as train
from checks import Checker, say
from torch_kit import start

rank, size, gloo = start(sys.argv[1], MPI.COMM_WORLD)
check = Checker(rank)
check.true(dist.get_backend() == "dpcore" and dist.get_rank() == rank, "the default group")
check.true(dist.group.WORLD.communicator.rank == rank, "dpcore's rank is torch's")

for part in (coll.check_all_reduce, coll.check_unsigned, coll.check_moves,
             coll.check_reduce_scatter, coll.check_coalesced, coll.check_groups, coll.check_objects,
             coll.check_refusals, coll.check_backward_thread, exch.check_sparse, exch.check_all_gather_coalesced,
             exch.check_reduce, exch.check_gather_scatter, exch.check_all_to_all,
             exch.check_p2p, train.check_ddp, train.check_fsdp):
    began = time.perf_counter()
    try:
        part(check, rank, size, gloo)
    except Exception as e:  # report it with the rest, and go on to the next part
        check.true(False, f"{part.__name__}: {type(e).__name__}: {e}")
    if rank == 0:  # where the test's time goes
        say(rank, f"{part.__name__} took {time.perf_counter() - began:.1f} s")


def fails_on_every_rank(what, call):
    """A dpcore group of its own, where rank 0's call has one element more than the others':
    `call(group, tensor)` must raise dpcore's error on every rank."""
    group = dist.new_group(backend="dpcore", timeout=timedelta(seconds=20))
    try:
        call(group, torch.ones(10 + (rank == 0)))
        check.true(False, f"{what}: a mismatched call went through")
    except Exception as e:
        check.true("dpcore all_reduce" in str(e), f"{what}: {type(e).__name__}: {e}")


began = time.perf_counter()
fails_on_every_rank("sync", lambda g, t: dist.all_reduce(t, group=g))
fails_on_every_rank("wait()", lambda g, t: dist.all_reduce(t, group=g, async_op=True).wait())
fails_on_every_rank("future", lambda g, t: dist.all_reduce(
    t, group=g, async_op=True).get_future().wait())


def ddp_backward(group, t):
    net = train.DDP(train.Net(), process_group=group)
    if rank == 0:  # one extra call: rank 0's next all_reduces meet the others' out of turn
        dist.all_reduce(t, group=group, async_op=True)
    net(torch.ones(2, 12), use_side=True).sum().backward()


fails_on_every_rank("DDP backward", ddp_backward)
check.true(dist.new_group(backend="dpcore", timeout=timedelta(seconds=7)).communicator.timeout
           == 7, "a group's timeout is dpcore's")
if rank == 0:
    say(rank, f"the failures took {time.perf_counter() - began:.1f} s")
dist.barrier()
dist.destroy_process_group()
check.finish()
