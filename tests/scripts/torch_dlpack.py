"""CPU torch tensors through DLPack: results come back as torch tensors, out=/in-place calls
write into the caller's tensor (no copy), every dtype including bfloat16.

Usage: mpiexec -n K python -m mpi4py torch_dlpack.py [DTYPE ...]   (default: all but bfloat16)
"""
import sys

import numpy as np
import torch
from mpi4py import MPI

import dpcore
from checks import BFLOAT16, Checker, make_input, mpi_bcast, reference, say

world = MPI.COMM_WORLD
comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)

TORCH = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
         "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64}


def to_torch(a):
    """A torch tensor with a's values (bfloat16 through its bits)."""
    if a.dtype == BFLOAT16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def to_numpy(t, dtype):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BFLOAT16)
    return t.numpy()


def run(dtype_name, count=1009):
    dtype = np.dtype(dtype_name) if dtype_name != "bfloat16" else BFLOAT16
    everyone = [make_input(dtype, "sum", count, r, size) for r in range(size)]
    want = reference("sum", everyone)
    t = to_torch(everyone[rank])
    label = f"torch.{dtype_name}"

    y = comm.all_reduce(t)
    check.true(isinstance(y, torch.Tensor), f"all_reduce of a {label} returns a tensor")
    check.equal(to_numpy(y, dtype), want, f"all_reduce {label}")

    ptr = t.data_ptr()
    check.true(comm.all_reduce(t, out=t) is t, f"all_reduce(out=t) returns t, {label}")
    check.true(t.data_ptr() == ptr, f"in place keeps the storage, {label}")
    check.equal(to_numpy(t, dtype), want, f"all_reduce in place {label}")

    t = to_torch(everyone[rank])
    s = comm.reduce_scatter(t)
    start, stop = dpcore.shard_range(count, size, rank)
    check.true(isinstance(s, torch.Tensor), f"reduce_scatter of a {label} returns a tensor")
    check.equal(to_numpy(s, dtype), want[start:stop], f"reduce_scatter {label}")
    g = comm.all_gather(s)
    check.equal(to_numpy(g, dtype), want, f"all_gather(reduce_scatter(t)) {label}")
    out = to_torch(np.zeros(count, dtype))
    check.true(comm.all_gather(s, out=out) is out, f"all_gather(out=) returns out, {label}")
    check.equal(to_numpy(out, dtype), want, f"all_gather out= {label}")

    root = size - 1
    b = to_torch(everyone[rank])
    ptr = b.data_ptr()
    check.true(comm.broadcast(b, root=root) is b, f"broadcast returns its tensor, {label}")
    check.true(b.data_ptr() == ptr, f"broadcast in place, {label}")
    check.equal(to_numpy(b, dtype), mpi_bcast(world, everyone[rank], root), f"broadcast {label}")

    w = comm.all_reduce(to_torch(everyone[rank]), async_op=True, algo="ring")
    check.equal(to_numpy(w.wait(), dtype), want, f"async all_reduce {label}")


for name in sys.argv[1:] or TORCH:
    if name == "bfloat16" and BFLOAT16 is None:
        say(rank, "skipping bfloat16: ml_dtypes is not installed")
        continue
    try:
        run(name)
    except Exception as e:  # every rank fails the same way, locally, before sending anything
        check.true(False, f"torch.{name}: {type(e).__name__}: {e}")

# A non-contiguous tensor is refused before anything is sent (on this rank only).
if rank == 0:
    try:
        comm.all_reduce(torch.arange(10, dtype=torch.float32)[::2])
        check.true(False, "a strided tensor was accepted")
    except ValueError:
        pass
check.equal(comm.all_reduce(np.ones(3, np.int32)), np.full(3, size, np.int32),
            "usable after refusing a strided tensor")

comm.close()
check.finish()
