"""torch tensors as dpcore's arrays, and torch's ReduceOp as dpcore's op: a CPU tensor as a NumPy
view of the same memory, a CUDA tensor as itself (dpcore's device path reads its
__cuda_array_interface__ and orders the call on torch's current stream of its device).

`Tensor.numpy()` is a few times cheaper than `numpy.from_dlpack` (about 2 us against 7 here),
and a 4-byte all_reduce is mostly such fixed costs, so the backend makes the NumPy views itself
and hands dpcore plain arrays (its fastest path). Collectives that only move data (broadcast,
all_gather) take every dtype torch has (bool, complex, int16, ...): in the tensor's own dtype
where dpcore has it, so that every rank's call header carries the dtype and element count and a
float32 tensor against an int32 one of the same bytes is a mismatch, as bytes only for the
dtypes dpcore has not got (complex128, the float8s); reductions take the dtypes dpcore
reduces.
"""
import torch
import torch.distributed as dist

from ..dtypes import bfloat16_dtype

# Compared in turn, SUM first: a ReduceOp compares with a RedOpType in C++ in well under a
# microsecond, while hashing either costs 2 us, a tenth of a small call here.
_OPS = ((dist.ReduceOp.SUM, "sum"), (dist.ReduceOp.AVG, "avg"), (dist.ReduceOp.MAX, "max"),
        (dist.ReduceOp.MIN, "min"), (dist.ReduceOp.PRODUCT, "prod"))


def op_name(reduce_op):
    """dpcore's name for torch's ReduceOp; ValueError for those dpcore does not reduce with."""
    for op, name in _OPS:
        if reduce_op == op:
            return name
    named = str(getattr(reduce_op, "op", reduce_op)).replace("RedOpType", "ReduceOp")
    raise ValueError(f"dpcore: torch's {named} is not supported; the dpcore backend "
                     f"reduces with ReduceOp.SUM, AVG, PRODUCT, MIN and MAX")


def as_array(t):
    """A view of tensor t (no copy), in t's dtype, for a reduction: NumPy's of a CPU tensor, the
    tensor itself on CUDA (whose dtypes the device path checks)."""
    if not t.requires_grad:
        try:  # refuses what the checks below name: CUDA, a sparse tensor, bfloat16
            return t.numpy()
        except (TypeError, RuntimeError):
            pass
    _check_device(t)
    if t.requires_grad:
        t = t.detach()
    if t.is_cuda:
        return t
    if t.dtype is torch.bfloat16:
        bfloat16 = bfloat16_dtype()
        if bfloat16 is None:
            raise TypeError("dpcore: bfloat16 tensors need ml_dtypes "
                            "(pip install ml_dtypes, or dpcore[torch])")
        return t.view(torch.int16).numpy().view(bfloat16)
    try:
        return t.numpy()
    except TypeError:  # a dtype NumPy has not got (float8, ...)
        raise TypeError(f"dpcore: cannot reduce torch.{str(t.dtype)[6:]} tensors; dpcore reduces "
                        f"float16, bfloat16, float32, float64, int8, uint8, int32, uint32, "
                        f"int64, uint64") from None


def as_moved(t, what="tensor"):
    """A 1-D view of contiguous tensor t's memory (no copy), for a collective that moves it: in
    t's dtype where dpcore has it, else as bytes (uint8); NumPy's on the CPU, torch's on CUDA."""
    _check_device(t)
    if not t.is_contiguous():
        raise ValueError(f"dpcore: {what} must be contiguous (call .contiguous() first)")
    if t.requires_grad:
        t = t.detach()
    flat = t.view(-1)
    typed = flat.dtype in _MOVED_TYPED or (flat.dtype is torch.bfloat16
                                           and bfloat16_dtype() is not None)
    if flat.is_cuda:
        return flat if typed else flat.view(torch.uint8)
    if not typed:
        return flat.view(torch.uint8).numpy()
    if flat.dtype is torch.bfloat16:
        return flat.view(torch.int16).numpy().view(bfloat16_dtype())
    return flat.numpy()


# The dtypes that torch and dpcore share (bfloat16 aside: its NumPy dtype is ml_dtypes').
_MOVED_TYPED = (torch.float16, torch.float32, torch.float64, torch.int8, torch.uint8,
                torch.int32, torch.uint32, torch.int64, torch.uint64, torch.bool, torch.int16,
                torch.uint16, torch.complex64)


def _check_device(t):
    if not (t.is_cpu or t.is_cuda):
        raise ValueError(f"dpcore: the torch backend takes CPU and CUDA tensors; this one is on "
                         f"{t.device}")
    if t.layout is not torch.strided:
        raise TypeError(f"dpcore: {t.layout} tensors are not supported, only dense ones")


def one(tensors, what):
    """The single tensor of a list that torch passes per device (a group has one device)."""
    if len(tensors) != 1:
        raise ValueError(f"dpcore: {what} takes one tensor per call, got {len(tensors)}")
    return tensors[0]
