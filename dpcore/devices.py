"""Where the trainer's arrays live: NumPy arrays on the host, CuPy arrays on a GPU.

The trainer never names a module. It asks an array for its own (array_module) and allocates
its buffers with that one, so a model moved to the GPU (model.to("cuda"), or model.to(cupy))
trains there with no other change, and hands the collectives the arrays it holds. CuPy is
imported only where a CuPy array already exists or "cuda" is asked for.

A device array never becomes a NumPy array unasked (CuPy refuses np.asarray, and a copy to the
host on every step would be silent): to_module moves data between modules on purpose.
"""
import sys

import numpy as np


def array_module(a):
    """numpy; cupy for a CuPy array; for any other array that names its module the Array API
    way (`__array_namespace__`, as the tests' strict stand-in for CuPy does), that module."""
    if type(a) is np.ndarray:
        return np
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy
    if hasattr(a, "__array_namespace__") and not isinstance(a, (np.ndarray, np.generic)):
        return a.__array_namespace__()
    return np


def is_cupy(xp):
    return xp is not np and xp is sys.modules.get("cupy")


def to_module(a, xp):
    """`a` as an array of module xp: `a` itself if it is one already; from a device to the host
    by .get() (never np.asarray, which CuPy refuses); onto a device by xp.asarray."""
    source = array_module(a)
    if source is not np and source is not xp:
        a = a.get()
    return xp.asarray(a)


def device_module(device, local_rank=None):
    """The array module of a device: numpy for "cpu"; cupy for "cuda", on CuPy's current GPU,
    or, given a local_rank, on GPU local_rank % (GPUs here), made current (one GPU per rank of
    a node). Without CuPy or a usable GPU, a RuntimeError that says why in one line."""
    if device == "cpu":
        return np
    if device != "cuda":
        raise ValueError(f"device must be 'cpu' or 'cuda', not {device!r}")
    try:
        import cupy
    except ImportError:
        raise RuntimeError("device 'cuda' needs CuPy, which is not installed (pip install "
                           "cupy-cuda13x, or dpcore's [cuda] extra)") from None
    except Exception as e:  # its CUDA libraries are missing, or do not match
        raise RuntimeError(f"device 'cuda' needs CuPy, which does not import here: "
                           f"{_one_line(e)}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        if count == 0:
            raise RuntimeError("no GPU")
        if local_rank is not None:
            cupy.cuda.Device(local_rank % count).use()
        cupy.zeros(1)  # makes the device's context: a GPU that is busy or lost fails here
    except Exception as e:  # no driver, no device, a device that is busy or lost
        raise RuntimeError(f"device 'cuda' finds no usable GPU here: {_one_line(e)}") from None
    return cupy


def _one_line(e):
    return " ".join(f"{type(e).__name__}: {e}".split())
