"""Shared by the torch backend's test scripts: starting torch.distributed under mpiexec with a
dpcore default group and a gloo group of the same ranks, exact test data as torch tensors, and
bitwise comparisons of tensors for checks.Checker."""
import os
import socket
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

import dpcore.torch  # noqa: F401  (registers the backend)
from checks import BFLOAT16, make_input

# The dtypes dpcore reduces and torch and gloo have (bfloat16 where ml_dtypes is installed).
REDUCE_DTYPES = [torch.float16, torch.float32, torch.float64, torch.int8, torch.uint8,
                 torch.int32, torch.int64] + ([torch.bfloat16] if BFLOAT16 is not None else [])
# Moved, never reduced: every dtype goes (as bytes); gloo has no int16, so int16 results are
# checked against the data every rank knows the others have.
MOVE_DTYPES = REDUCE_DTYPES + [torch.bool, torch.int16, torch.complex64]
OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "prod": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}


def start(method, world, directory="/tmp"):
    """init_process_group("dpcore") over every MPI rank by `method` (env, tcp or file: a store
    file in `directory`), with torch's ranks the reverse of MPI's for tcp and file (the backend
    must order its communicator by torch's ranks); returns (rank, size, gloo group of all
    ranks)."""
    size = world.size
    rank = world.rank if method == "env" else size - 1 - world.rank
    port = world.bcast(_free_port() if world.rank == 0 else None)
    where = {"env": "env://", "tcp": f"tcp://127.0.0.1:{port}",
             "file": f"file://{directory}/dpcore-torch-{port}"}[method]
    if method == "env":
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("dpcore", init_method=where, rank=rank, world_size=size,
                            timeout=timedelta(seconds=60))
    return rank, size, dist.new_group(backend="gloo")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tensor(dtype, count, rank, size, op="sum"):
    """Rank `rank`'s exact input (checks.make_input: integer values, sums of every rank exact)
    as a torch tensor of `dtype`."""
    if dtype is torch.bool:
        return torch.from_numpy(make_input(np.dtype("uint8"), op, count, rank, size) % 2 == 1)
    if dtype is torch.complex64:
        re = make_input(np.dtype("float32"), op, 2 * count, rank, size)
        return torch.from_numpy(re).view(torch.complex64)
    if dtype is torch.int16:
        return torch.from_numpy(make_input(np.dtype("int32"), op, count, rank, size)).short()
    if dtype is torch.bfloat16:
        a = make_input(BFLOAT16, op, count, rank, size)
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(make_input(np.dtype(str(dtype)[6:]), op, count, rank, size))


def same(check, got, want, label):
    """check.true that got and want have one dtype, one shape and the same bits."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return check.true(False, f"{label}: {got.dtype} {tuple(got.shape)}, expected "
                                 f"{want.dtype} {tuple(want.shape)}")
    g, w = (t.detach().contiguous().view(-1).view(torch.uint8) for t in (got, want))
    wrong = (g != w).nonzero()
    if len(wrong):
        i = int(wrong[0]) // got.element_size()
        return check.true(False, f"{label}: {len(wrong)} bytes differ; element {i}: got "
                                 f"{got.reshape(-1)[i].item()}, expected "
                                 f"{want.reshape(-1)[i].item()}")
    return check.true(True, label)
