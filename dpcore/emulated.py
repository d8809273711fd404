"""Arrays that pass for CUDA arrays where there is no GPU: host memory behind a
`__cuda_array_interface__`, for the device path's CPU emulation (DPCORE_CUDA_EMULATION=1). The
device transport then runs its very schedule and kernel bodies on the CPU (csrc/cuda/
emulated_device.cc), which is how CI, without a GPU, tests the CUDA path end to end.

    x = dpcore.emulated.asarray(numpy_array)     # a copy, "on the device"
    y = comm.all_reduce(x)                       # an EmulatedArray
    y.get()                                      # back to NumPy, as cupy's .get()
"""
import numpy as np


class EmulatedArray:
    """A C-contiguous NumPy buffer that dpcore treats as device memory."""

    def __init__(self, host):
        self._host = host

    @property
    def __cuda_array_interface__(self):
        return {"version": 3, "shape": self._host.shape, "typestr": self._host.dtype.str,
                "data": (self._host.ctypes.data, not self._host.flags.writeable),
                "strides": None if self._host.flags.c_contiguous else self._host.strides,
                "stream": None}

    shape = property(lambda self: self._host.shape)
    dtype = property(lambda self: self._host.dtype)
    size = property(lambda self: self._host.size)
    nbytes = property(lambda self: self._host.nbytes)

    def new_empty(self, shape):
        return empty(shape, self.dtype)

    def get(self):
        """A NumPy copy, as CuPy's ndarray.get()."""
        return self._host.copy()

    def __getitem__(self, index):  # views share the memory, as on a device
        return EmulatedArray(self._host[index])

    def reshape(self, *shape):
        return EmulatedArray(self._host.reshape(*shape))

    def __repr__(self):
        return f"EmulatedArray({self._host!r})"


def asarray(a, dtype=None):
    return EmulatedArray(np.array(a, dtype=dtype, order="C", copy=True))


def empty(shape, dtype=np.float32):
    return EmulatedArray(np.empty(shape, dtype))
