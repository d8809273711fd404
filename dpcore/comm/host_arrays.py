"""Turning user arrays into NumPy views without copies, and results back into the user's type."""
import sys

import numpy as np

from .. import _C

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
    from ..dtypes import bfloat16_dtype

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
