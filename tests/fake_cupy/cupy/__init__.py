"""A stand-in for CuPy where there is no GPU (CI): host memory under CuPy's names, for the calls
the bench makes on --device cuda (dpcore/bench/devices.py, compare.py). With it on PYTHONPATH,
`python -m dpcore.bench ... --device cuda` runs its own code on the host: the choice of each
rank's GPU, filling buffers through set() and reading them back through get(), the
synchronisation, the copy floor through device pointers, NCCL left out. The arrays are NumPy
arrays, so dpcore's collectives take them as host arrays: this checks the bench, not a GPU.

It refuses what CuPy would do differently: an allocation before a device was made current (CuPy
would use device 0, whatever the rank), set() from anything but a host array of the same shape
and dtype.

FAKE_CUPY_DEVICES: the GPUs the runtime reports (default 1; 0: it finds none and raises, as
CuPy's CUDARuntimeError). There is no cupy.cuda.nccl here.

FAKE_CUPY_EMULATED=1 (with DPCORE_CUDA_EMULATION=1): the arrays are dpcore.emulated's instead,
so dpcore's collectives take them as CUDA arrays and run them on the device transport's
emulation, and the bench's own --device cuda code meets dpcore's device path.
"""
import ctypes
import os

import numpy as np

from . import cuda

EMULATED = os.environ.get("FAKE_CUPY_EMULATED") == "1"

__version__ = "0.0-fake"


class _MemoryPointer:
    def __init__(self, array):
        self.ptr = array.__array_interface__["data"][0]

    def copy_from_device_async(self, src, size, stream=None):
        ctypes.memmove(self.ptr, src.ptr, size)


class ndarray(np.ndarray):
    @property
    def data(self):
        return _MemoryPointer(self)

    def get(self):
        return np.array(self, subok=False)

    def set(self, arr):
        if type(arr) is not np.ndarray:
            raise TypeError(f"set() takes a numpy.ndarray, not {type(arr).__name__}")
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError(f"set(): {arr.shape} {arr.dtype} into {self.shape} {self.dtype}")
        np.copyto(self.view(np.ndarray), arr)


def empty(shape, dtype=float):
    if cuda.runtime.current is None:
        raise RuntimeError("fake cupy: an allocation before any cuda.Device(i).use()")
    if EMULATED:
        from dpcore import emulated

        memory = emulated.empty(shape, dtype)
        memory.data = _MemoryPointer(memory._host)  # an EmulatedArray takes new attributes
        return memory
    return np.empty(shape, dtype).view(ndarray)


def asnumpy(a):
    return np.array(a, subok=False)
