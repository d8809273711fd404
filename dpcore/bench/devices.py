"""Where the bench's buffers live: host memory (NumPy, --device cpu) or a GPU (CuPy, --device
cuda). The harness makes, fills, reads back and waits for its buffers through one of these
objects and nothing else, so everything else is the same code for both:

    empty(count, dtype)   a buffer of count elements
    pool(nbytes)          --one-buffer's uint8 buffer, allocated once at -e's size
    fill(dst, write)      write(a) fills a host array shaped as dst; its values land in dst
    to_host(a)            a NumPy array of a's values (a itself on the host)
    synchronize()         return once the device has done the work asked of it
    copy_call(nbytes)     a call that copies nbytes between two buffers here: the copy floor
    supports(dtype)       whether buffers of that dtype can be made here
    describe()            this rank's device, for the header (None on the host)

open_arrays(device, world) makes one on every rank, or raises DeviceUnavailable on every rank.
"""
import numpy as np

from ..dtypes import bfloat16_dtype

CUPY_HINT = "pip install cupy-cuda13x, or dpcore's [cuda] extra"


class DeviceUnavailable(Exception):
    """--device cuda cannot run here (no CuPy, no GPU); the message is one line for the user."""


def huge_page_buffer(nbytes):
    """nbytes of touched memory from a 2 MiB boundary, so that its front can sit in one huge
    page (NumPy asks for them for allocations this large): nccl-tests' layout, where buffers
    are allocated once at the largest size."""
    huge = 2 << 20
    raw = np.ones(nbytes + huge, np.uint8)
    start = -raw.ctypes.data % huge
    return raw[start:start + nbytes]


class HostArrays:
    name = "cpu"

    empty = staticmethod(np.empty)
    pool = staticmethod(huge_page_buffer)

    @staticmethod
    def fill(dst, write):
        write(dst)

    @staticmethod
    def to_host(a):
        return a

    @staticmethod
    def synchronize():
        pass  # a call on host buffers has done its work when it returns

    @staticmethod
    def copy_call(nbytes):
        src, dst = np.ones(nbytes, np.uint8), np.ones(nbytes, np.uint8)  # every page touched
        return lambda: np.copyto(dst, src)

    @staticmethod
    def supports(dtype):
        return True

    @staticmethod
    def describe():
        return None  # the header's rank lines stay as they were before --device


class CudaArrays:
    """Buffers on GPU local_rank % device count of this rank's node, made current before
    anything is allocated (and before dpcore.init, which may look for it)."""

    name = "cuda"

    def __init__(self, cupy, local_rank, local_size):
        self.cupy = cupy
        try:
            self.device_count = cupy.cuda.runtime.getDeviceCount()
            if self.device_count < 1:
                raise RuntimeError("the CUDA runtime counts 0 devices")
            self.device = local_rank % self.device_count
            cupy.cuda.Device(self.device).use()
            name = cupy.cuda.runtime.getDeviceProperties(self.device)["name"]
        except Exception as e:  # CuPy's CUDARuntimeError, or a driver it cannot load
            raise DeviceUnavailable(f"found no usable GPU: {one_line(e)}") from None
        self.device_name = name.decode() if isinstance(name, bytes) else str(name)
        self.ranks_on_node = local_size

    def empty(self, count, dtype):
        return self.cupy.empty(count, dtype)

    def pool(self, nbytes):
        return self.cupy.empty(nbytes, np.uint8)

    def fill(self, dst, write):
        host = np.empty(dst.shape, dst.dtype)
        write(host)
        dst.set(host)
        self.synchronize()

    @staticmethod
    def to_host(a):
        return a.get()

    def synchronize(self):
        self.cupy.cuda.runtime.deviceSynchronize()

    def copy_call(self, nbytes):
        src, dst = self.cupy.empty(nbytes, np.uint8), self.cupy.empty(nbytes, np.uint8)
        return lambda: dst.data.copy_from_device_async(src.data, nbytes)

    @staticmethod
    def supports(dtype):
        return bfloat16_dtype() is None or np.dtype(dtype) != bfloat16_dtype()  # CuPy has none

    def describe(self):
        return f"cuda device {self.device} ({self.device_name})"


def one_line(e):
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def import_cupy():
    try:
        import cupy
    except Exception as e:  # ImportError, or CuPy failing to load its CUDA libraries
        raise DeviceUnavailable(f"needs CuPy ({CUPY_HINT}): {one_line(e)}") from None
    return cupy


def open_arrays(device, world):
    """HostArrays or CudaArrays for this rank; world: MPI.COMM_WORLD. With --device cuda, a
    DeviceUnavailable on one rank is raised on every rank, naming the rank where they differ."""
    if device == "cpu":
        return HostArrays()
    from mpi4py import MPI

    node = world.Split_type(MPI.COMM_TYPE_SHARED)  # collective: before anything can fail
    local_rank, local_size = node.Get_rank(), node.Get_size()
    node.Free()
    arrays, problem = None, None
    try:
        arrays = CudaArrays(import_cupy(), local_rank, local_size)
    except DeviceUnavailable as e:
        problem = str(e)
    problems = world.allgather(problem)
    failed = [(r, p) for r, p in enumerate(problems) if p is not None]
    if failed:
        rank, text = failed[0]
        where = "" if len(set(problems)) == 1 else f" (rank {rank})"
        raise DeviceUnavailable(f"--device cuda{where} {text}")
    return arrays
