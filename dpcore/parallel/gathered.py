"""A unit's full parameters at ZeRO stage 3: one buffer whose memory comes and goes.

The autograd graph of a forward keeps views of the parameters it used (W.T in x @ W.T), and
backward reads them. Handing the module a new array for backward would leave the graph reading
the old one, so the buffer must stay at the same address while its memory is released and
refilled under the views, which is what PyTorch FSDP does by resizing the storage to zero. On
Linux a private anonymous mapping does it: madvise(MADV_DONTNEED) gives its pages back to the
system (resident memory drops, views read zeros) and the next all-gather faults them in again.
Where that is not available (CuPy arrays, other systems) the buffer simply stays allocated;
results are the same, only the memory saving is lost, and `releasable` says so.
"""
import mmap

import numpy as np


class GatheredUnit:
    def __init__(self, count, dtype, xp=np):
        nbytes = count * np.dtype(dtype).itemsize
        self._map = None
        if xp is np and nbytes and hasattr(mmap, "MADV_DONTNEED") and hasattr(mmap, "MAP_PRIVATE"):
            self._map = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            self.data = np.frombuffer(self._map, dtype, count)
        else:
            self.data = xp.zeros(count, dtype)
        self.resident = False  # holds the gathered parameters (or they are on their way)
        self.work = None       # the all-gather filling it, until waited for

    @property
    def releasable(self):
        return self._map is not None

    @property
    def nbytes(self):
        """Bytes this buffer holds now."""
        return self.data.nbytes if self.resident or not self.releasable else 0

    def release(self):
        if self.work is not None:  # never drop pages that a collective is still writing
            self.work.wait()
            self.work = None
        if self._map is not None:
            self._map.madvise(mmap.MADV_DONTNEED)
        self.resident = False
