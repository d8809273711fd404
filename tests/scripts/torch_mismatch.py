"""Mismatched calls through the torch backend, on 3 ranks, each in a dpcore group of its own (a
mismatch leaves its communicator unusable). Every rank prints 'rank R: CASE SECONDS | TYPE |
LINES | MESSAGE' for each case, TYPE the exception's class (or 'none' where the call returned),
LINES how many lines its message has:

- bytes: broadcast and all_gather_into_tensor of tensors of one byte size but different
  dtypes (float32 x4 against int32 x4; float64 x2 against float32 x4; bool x4 against uint8
  x4 and int16 x4 against uint16 x4, dtypes dpcore moves but does not reduce) must fail on
  every rank, not hand over reinterpreted bits;
- future: the error of an async call, through work.get_future().wait(), is dpcore.CommError;
- members: new_group where rank 2 believes the group is [1, 2] and the others [0, 1];
- splits: all_to_all_single where rank 0 expects 2 rows from each rank and the others send it 1;
- sparse: sparse all_reduce of tensors of different shapes;
- p2p: rank 0 sends float32 x4, rank 1 receives int32 x4 (rank 2 stays out: 'none').

Usage: mpiexec -n 3 python torch_mismatch.py   (DPCORE_TIMEOUT short)
"""
import time

import torch
import torch.distributed as dist
from mpi4py import MPI

import dpcore
from checks import say
from torch_kit import start

rank, size, _ = start("env", MPI.COMM_WORLD)
assert size == 3


def case(name, call):
    started = time.monotonic()
    try:
        call()
        kind, message = "none", ""
    except Exception as e:
        kind, message = type(e).__name__, str(e)
    lines = len(message.splitlines())
    say(rank, f"{name} {time.monotonic() - started:.1f} | {kind} | {lines} | "
              f"{' '.join(message.split())}")


def bytes_broadcast(group):
    dtype = torch.float32 if rank == 0 else torch.int32
    dist.broadcast(torch.arange(4).to(dtype), src=0, group=group)


def bytes_gather(group):
    t = torch.ones(2, dtype=torch.float64) if rank == 0 else torch.ones(4, dtype=torch.float32)
    out = torch.empty(size * t.numel(), dtype=t.dtype)
    dist.all_gather_into_tensor(out, t, group=group)


def bytes_bool(group):
    dist.broadcast(torch.ones(4, dtype=torch.bool if rank == 0 else torch.uint8), src=0,
                   group=group)


def bytes_int16(group):
    t = torch.ones(4, dtype=torch.int16 if rank == 0 else torch.uint16)
    dist.all_gather_into_tensor(torch.empty(size * 4, dtype=t.dtype), t, group=group)


def future(group):
    t = torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int32)
    dist.all_reduce(t, group=group, async_op=True).get_future().wait()


def splits(group):
    out_rows = [2] * size if rank == 0 else [1] * size
    out = torch.zeros(sum(out_rows), 2)
    dist.all_to_all_single(out, torch.ones(size, 2), out_rows, [1] * size, group=group)


def sparse(group):
    shape = (3, 4) if rank == 0 else (3, 5)
    dist.all_reduce(torch.sparse_coo_tensor(torch.tensor([[0], [1]]), torch.ones(1), shape),
                    group=group)


def p2p(group):
    if rank == 0:
        dist.send(torch.ones(4), 1, group=group)
    elif rank == 1:
        dist.recv(torch.ones(4, dtype=torch.int32), 0, group=group)


for name, call in [("bytes_broadcast", bytes_broadcast), ("bytes_gather", bytes_gather),
                   ("bytes_bool", bytes_bool), ("bytes_int16", bytes_int16), ("future", future), ("splits", splits), ("sparse", sparse), ("p2p", p2p)]:
    group = dist.new_group(backend="dpcore")
    case(name, lambda: call(group))


def members():
    ranks = [1, 2] if rank == 2 else [0, 1]
    group = dist.new_group(ranks, backend="dpcore")
    if group is not dist.GroupMember.NON_GROUP_MEMBER:
        t = torch.ones(4)
        dist.all_reduce(t, group=group)


case("members", members)
say(rank, "ok")
