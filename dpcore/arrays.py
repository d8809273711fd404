"""Turning user arrays into NumPy views without copies, results back into the user's type, and
the checks an `out` must pass."""
import sys

import numpy as np

from . import _C

_KDL_CPU = 1


def as_numpy(x, what="x"):
    """(array, wrap): a NumPy view of x (no copy) and a function that turns a NumPy result back
    into x's array type (None for NumPy input)."""
    if isinstance(x, np.ndarray):
        return x, None
    if hasattr(x, "__dlpack__"):
        device = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else _KDL_CPU
        if device != _KDL_CPU:
            raise TypeError(
                f"dpcore: {what} lives on a device (DLPack device type {device}), but the "
                f"call's other arrays are host arrays: pass all on the device or all on the host")
        if getattr(x, "requires_grad", False):  # torch would refuse to export it (BufferError)
            raise TypeError(f"dpcore: {what} requires grad; pass {what}.detach() (a collective "
                            f"is not recorded by autograd)")
        module = sys.modules.get(type(x).__module__.split(".")[0])
        from_dlpack = getattr(module, "from_dlpack", None)
        if str(getattr(x, "dtype", "")).endswith("bfloat16"):
            array = _bfloat16_view(x, from_dlpack)
        else:
            array = np.from_dlpack(x), from_dlpack
        if not array[0].flags.c_contiguous:  # say how in the caller's own library
            how = f"use {what}.contiguous()" if hasattr(x, "contiguous") else "copy it first"
            raise ValueError(f"dpcore: {what} must be C-contiguous ({how})")
        return array
    raise TypeError(f"dpcore: {what} must be a numpy.ndarray or export DLPack, not {type(x).__name__}")


def _bfloat16_view(x, from_dlpack):
    """NumPy has no DLPack code for bfloat16: move the bits as int16 and view them as
    ml_dtypes.bfloat16 (both ways), still without a copy."""
    from .dtypes import bfloat16_dtype

    bfloat16 = bfloat16_dtype()
    if bfloat16 is None or not hasattr(x, "view"):
        raise TypeError("dpcore: bfloat16 arrays need ml_dtypes (pip install ml_dtypes)")
    bits_dtype = getattr(sys.modules.get(type(x).__module__.split(".")[0]), "int16", np.int16)
    array = np.from_dlpack(x.view(bits_dtype)).view(bfloat16)
    original = x.dtype

    def wrap(result):
        return from_dlpack(result.view(np.int16)).view(original)

    return array, wrap


def check_contiguous(a, what):
    if not a.flags.c_contiguous:
        raise ValueError(f"dpcore: {what} must be C-contiguous (use numpy.ascontiguousarray)")


def check_out(out, dtype, size, shape, what="out"):
    """A NumPy view of the user's `out`, after checking it can take the result. On the path of
    every out-of-place call, so each check is made once (a shape that matches has the size)."""
    o = out if type(out) is np.ndarray else as_numpy(out, what)[0]
    if o.dtype != dtype:
        raise TypeError(f"dpcore: {what} has dtype {o.dtype}, expected {dtype}")
    if shape is not None:
        if o.shape != shape:
            raise ValueError(f"dpcore: {what} has shape {o.shape}, expected {shape}")
    elif size is not None and o.size != size:
        raise ValueError(f"dpcore: {what} has {o.size} elements, expected {size}")
    flags = o.flags
    if not flags.c_contiguous:
        check_contiguous(o, what)  # raises
    if not flags.writeable:
        raise ValueError(f"dpcore: {what} is read-only")
    return o



def check_in_place(x, out, at=0, what="x"):
    """out (C-contiguous, checked by check_out) may share memory with x (C-contiguous) only in
    the collective's in-place form: starting `at` bytes into x (all_reduce: 0, the very memory
    of x in any view; reduce_scatter: this rank's shard). Any other overlap would have the
    collective overwrite input it has still to read, so it raises ValueError."""
    offset = _C.overlap(x, out)
    if offset is not None and offset != at:
        place = "its very memory" if at == 0 else f"the part that starts {at} bytes into it"
        raise ValueError(f"dpcore: out partly overlaps {what} (it starts {offset:+d} bytes from "
                         f"{what}'s start); in place, out must be {place}")


def check_shard_in_out(shard, out):
    """all_gather's shard may lie in out only whole and on an element boundary, for the
    in-place form (the shard at its rank's place, which C++ checks with every rank's shard
    length: csrc/core/call.h, misfit); any other overlap raises ValueError."""
    offset = _C.overlap(out, shard)
    if offset is not None and not (0 <= offset and offset + shard.nbytes <= out.nbytes
                                   and offset % out.itemsize == 0):
        raise ValueError(f"dpcore: the shard partly overlaps out (it starts {offset:+d} bytes "
                         f"from out's start); in place, it must be its rank's own slice of out")
