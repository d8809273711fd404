"""Where the bench's buffers live: host memory (NumPy) here, a GPU (CuPy) next. The harness makes,
fills, reads back and waits for its buffers through one of these objects and nothing else, so
everything else can be the same code for both:

    empty(count, dtype)   a buffer of count elements
    pool(nbytes)          --one-buffer's uint8 buffer, allocated once at -e's size
    fill(dst, write)      write(a) fills a host array shaped as dst; its values land in dst
    to_host(a)            a NumPy array of a's values (a itself on the host)
    synchronize()         return once the device has done the work asked of it
    copy_call(nbytes)     a call that copies nbytes between two buffers here: the copy floor
    supports(dtype)       whether buffers of that dtype can be made here
    describe()            this rank's device, for the header (None on the host)
"""
import numpy as np



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
        return None  # the header's rank lines stay as they were
