"""Arrays that pass for CUDA arrays where there is no GPU: host memory behind a
`__cuda_array_interface__`, for the device path's CPU emulation (DPCORE_CUDA_EMULATION=1). The
device transport then runs its very schedule and kernel bodies on the CPU (csrc/cuda/
emulated_device.cc), which is how CI, without a GPU, tests the CUDA path end to end.

    x = dpcore.emulated.asarray(numpy_array)     # a copy, "on the device"
    y = comm.all_reduce(x)                       # an EmulatedArray
    y.get()                                      # back to NumPy, as cupy's .get()

As on a GPU, writes from the host land late: set() queues its copy on the array's stream (the
legacy default, 1, or the per-thread default, 2, as `__cuda_array_interface__` names them), which
the emulation runs after a seeded random delay (csrc/cuda/emulated_stream.h); get() waits for
that stream first, as CuPy's does. A collective follows the caller's stream, so a call that
forgets to order its reads after it sees stale data here, as it would on the GPU.

Each array's memory is an allocation of the emulation's cudaMalloc (_C.EmulatedMemory,
csrc/cuda/emulated_memory.h), which a peer can map as CUDA IPC maps an allocation, so
comm.register works here; freeing one while a live peer maps it aborts the process, saying so.
"""
import contextlib

import numpy as np

from . import _C


class EmulatedArray:
    """A C-contiguous NumPy buffer that dpcore treats as device memory."""

    def __init__(self, host, owner, stream=1):
        self._host = host
        self._owner = owner  # what holds the memory (an allocation, or comm.alloc's region)
        self.stream = stream  # the caller's stream its host copies go to: 1 or 2

    @property
    def __cuda_array_interface__(self):
        return {"version": 3, "shape": self._host.shape, "typestr": self._host.dtype.str,
                "data": (self._host.ctypes.data, not self._host.flags.writeable),
                "strides": None if self._host.flags.c_contiguous else self._host.strides,
                "stream": self.stream}

    shape = property(lambda self: self._host.shape)
    dtype = property(lambda self: self._host.dtype)
    size = property(lambda self: self._host.size)
    nbytes = property(lambda self: self._host.nbytes)

    def new_empty(self, shape):
        return empty(shape, self.dtype, self.stream)

    def get(self):
        """A NumPy copy, once the array's stream has run what was queued on it, as CuPy's
        ndarray.get()."""
        _C.emulated_sync(self.stream)
        return self._host.copy()

    def set(self, a):
        """Queues a copy of NumPy array a in on the array's stream, as CuPy's ndarray.set()
        (cudaMemcpyAsync): it lands later."""
        if not self._host.flags.c_contiguous:
            raise ValueError("dpcore.emulated: set() needs a C-contiguous array")
        staged = np.empty_like(self._host)
        np.copyto(staged, a)
        _C.emulated_copy(self.stream, self._host.ctypes.data, staged.tobytes())

    def __getitem__(self, index):  # views share the memory, as on a device
        return EmulatedArray(self._host[index], self._owner, self.stream)

    def reshape(self, *shape):
        return EmulatedArray(self._host.reshape(*shape), self._owner, self.stream)

    def __repr__(self):
        return f"EmulatedArray({self._host!r})"


@contextlib.contextmanager
def capturing(stream=1):
    """Within it, `stream` says it is capturing a CUDA graph (cudaStreamIsCapturing), as under
    torch.cuda.graph or cupy's stream.begin_capture: nothing is captured, calls only see it."""
    _C.emulated_capture(stream, True)
    try:
        yield
    finally:
        _C.emulated_capture(stream, False)


def asarray(a, dtype=None, stream=1):
    """A copy of `a` in fresh device memory (written at once: the array's first contents)."""
    a = np.asarray(a, dtype=dtype)
    result = empty(a.shape, a.dtype, stream)
    np.copyto(result._host, a)
    return result


def empty(shape, dtype=np.float32, stream=1):
    """Fresh device memory, as cudaMalloc gives it: garbage until written, and an allocation
    of its own that comm.register can map into the peers (_C.EmulatedMemory)."""
    dtype = np.dtype(dtype)
    memory = _C.EmulatedMemory(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
    return at(memory.address, shape, dtype, memory, stream)


def at(address, shape, dtype, owner, stream=1):
    """The emulated device memory at `address` (a mapping that `owner` keeps) as an array."""
    import ctypes

    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = (ctypes.c_char * max(nbytes, 1)).from_address(address)
    host = np.frombuffer(raw, np.uint8, nbytes).view(dtype).reshape(shape)
    return EmulatedArray(host, owner, stream)
