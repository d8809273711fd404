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

    def __init__(self, host, owner=None):
        self._host = host
        self._owner = owner  # what holds the memory (comm.alloc's device side), kept alive

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

    def set(self, a):
        """Copies NumPy array a in, as CuPy's ndarray.set()."""
        np.copyto(self._host, a)

    def __getitem__(self, index):  # views share the memory, as on a device
        return EmulatedArray(self._host[index], self._owner)

    def reshape(self, *shape):
        return EmulatedArray(self._host.reshape(*shape), self._owner)

    def __repr__(self):
        return f"EmulatedArray({self._host!r})"


def asarray(a, dtype=None):
    return EmulatedArray(np.array(a, dtype=dtype, order="C", copy=True))


def empty(shape, dtype=np.float32):
    return EmulatedArray(np.empty(shape, dtype))


def at(address, shape, dtype, owner):
    """The emulated device memory at `address` (a mapping that `owner` keeps) as an array."""
    import ctypes

    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = (ctypes.c_char * max(nbytes, 1)).from_address(address)
    host = np.frombuffer(raw, np.uint8, nbytes).view(dtype).reshape(shape)
    return EmulatedArray(host, owner)
