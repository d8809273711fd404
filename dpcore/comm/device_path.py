"""The device path: collectives on CUDA arrays (CuPy, torch, __cuda_array_interface__), run by the
device transport (dpcore.setup.device_transport, csrc/cuda/), which is connected at the first
call on CUDA arrays. Algorithms: one_shot for calls up to one_shot_bytes per rank (auto's pick
there), the ring (auto's past it), and direct, asked for, on buffers from
comm.alloc(..., device="cuda"), which the peers have mapped (the transport checks that).
Each call follows the work queued on the caller's current stream before it; it returns once its
kernels have ended, and an async call's Work.wait() returns then too, so the result may be used
on any stream."""
import time
import weakref

from ..collectives import MOVING
from ..dtypes import ALGORITHMS
from ..setup import device_transport
from ..setup.segments import agreed_request
from .choice import RING, Rules
from .cuda_arrays import device_index, device_view, empty_like, stream_of


class DevicePath:
    """One communicator's device side (dpcore.comm.path.Path): its backend is made at the first
    call on CUDA arrays, on every rank at once, as that call is."""

    def __init__(self, boot, node, host, settings, timeout, one_shot_bytes):
        """host: the communicator's host backend, whose count of calls this side shares."""
        self._boot, self._node, self._settings, self._timeout = boot, node, settings, timeout
        self._host = host
        self._backend = None
        self._device = None  # the CUDA device of the first call's arrays
        self._regions = 0  # comm.alloc(device="cuda") buffers made: the next one's id
        self._dropped = set()  # ids of those whose arrays this rank has let go
        band = (0, one_shot_bytes)
        self.rules = Rules({coll: band for coll in MOVING}, lambda coll, n: band,
                           RING, one_shot_bytes, None)

    view = staticmethod(lambda x, what: (device_view(x, what), None))

    @staticmethod
    def out_view(out, what):
        o = device_view(out, what)
        if o is None:
            raise TypeError(f"dpcore: {what} must be on the device as x is, not a "
                            f"{type(out).__name__}")
        return o

    def check(self, v, what):
        if not v.contiguous:
            raise ValueError(f"dpcore: {what} must be C-contiguous (copy it first, as with "
                             f"cupy.ascontiguousarray)")
        if v.ptr % v.dtype.itemsize:
            raise ValueError(f"dpcore: {what} is not aligned to its {v.dtype.itemsize}-byte "
                             f"elements on the device")
        if self._device is not None and device_index(v) != self._device:
            raise ValueError(f"dpcore: {what} is on CUDA device {device_index(v)}, but this "
                             f"communicator's device is {self._device} (its first CUDA call's)")

    writable = staticmethod(lambda v: not v.readonly)

    @staticmethod
    def empty(v, shape, wrap):
        result = empty_like(v, shape)
        return device_view(result, "out"), result

    @staticmethod
    def overlap(a, b):
        """Where b starts, in bytes from a's start, if their memory overlaps; else None."""
        if a.nbytes and b.nbytes and a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes:
            return b.ptr - a.ptr
        return None

    # -- the backend ------------------------------------------------------------------------

    def run(self, coll, dtype, op, root, algo, x, out, count, total, splits=0):
        self._connected(x, coll).run_device(coll, dtype, op, root, algo, x.ptr, _ptr(out),
                                            count, total, stream_of(x), splits)

    def submit(self, coll, dtype, op, root, algo, x, out, count, total, splits=0):
        return self._connected(x, coll).submit_device(coll, dtype, op, root, algo, x.ptr,
                                                      _ptr(out), count, total, stream_of(x),
                                                      splits)

    def exchange_counts(self, coll, root, dtype, count, view):
        return self._connected(view, coll).exchange_counts(coll, root, dtype, count)

    def algo_calls(self):
        return self._backend.algo_calls() if self._backend is not None else [0] * len(ALGORITHMS)

    def counts(self):
        """The device transport's DeviceCounts, or None before the first call on CUDA arrays."""
        return None if self._backend is None else self._backend.counts()

    def _connected(self, view=None, coll=None, device=None):
        """The backend, set up at the first call on CUDA arrays (coll: that call's collective;
        None: comm.alloc's)."""
        if self._backend is None:
            if device is None:
                device = device_index(view) if view is not None else 0
            if coll is not None:  # a peer that made this call on host arrays: a CommError now
                self._host.meet_other_side(coll)
            backend = device_transport.connect(self._boot, self._node, self._settings,
                                               self._timeout, device)
            backend.pair_sides(self._host)  # before its first call: one count of calls
            self._backend, self._device = backend, device
        return self._backend

    @property
    def device(self):
        """What the device transport runs on ("cuda:0", "emulated"), or None before a call."""
        return None if self._backend is None else self._backend.device

    def alloc(self, shape, dtype):
        """comm.alloc(..., device="cuda"): this rank's zero-filled buffer of a region that every
        peer maps (CUDA IPC), in which direct reads the peers' data. Collective, as the host
        alloc; the array (and its views) keeps the region alive, and once every rank has let
        go of its array, a later alloc frees the region."""
        region, node = self._regions + 1, self._node
        shape, dtype, nbytes = agreed_request(node, shape, dtype, "cuda alloc")
        emulated = self._settings.cuda_emulation
        cupy = None if emulated else _cupy_for_alloc()
        backend = self._connected(device=0 if emulated else cupy.cuda.Device().id)
        size = max(nbytes, 16)  # every rank's region exists, even an empty one
        self._free_dropped(node, backend)
        self._regions = region
        address, handle = backend.alloc_region(size)
        everyone = node.allgather((address, handle), f"cuda alloc: exchange region {region}")
        node.on_every_rank(lambda: backend.map_region(region, size, [h for _, h in everyone],
                                                      [a for a, _ in everyone]),
                           f"cuda alloc: map the peers' buffers of region {region}")
        backend.unlink_slots()  # every peer has mapped it: no name is left to find
        owner = _Region(backend)  # held by the array and its views
        weakref.finalize(owner, self._dropped.add, region)
        if emulated:
            from .. import emulated as module

            return module.at(address, shape, dtype, owner)
        memory = cupy.cuda.UnownedMemory(address, size, owner, self._device)
        return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0))

    def _free_dropped(self, node, backend):
        """Frees the regions whose arrays every rank has let go (an alloc a step would
        otherwise keep them all): after the calls queued here, which may still read them, each
        rank unmaps the peers' buffers, and once all have, frees its own."""
        everyone = node.allgather(sorted(self._dropped.copy()),
                                  "cuda alloc: agree on the dropped buffers")
        common = set(everyone[0]).intersection(*everyone[1:])
        if not common:
            return
        backend.drain()
        node.on_every_rank(lambda: [backend.unmap_region(r) for r in sorted(common)],
                           "cuda alloc: unmap the dropped buffers")
        for r in sorted(common):
            backend.free_region(r)
        self._dropped -= common

    def close(self, why):
        """Leave, and free this rank's device memory once every peer has left or died: until
        then a peer's kernel may still read it (the last one_shot payload), and CUDA leaves
        freeing memory that a peer maps undefined (the emulation faults the peer). The wait is
        bounded by the timeout; past it, the backend and its memory stay until the process
        exits."""
        if self._backend is None:
            return
        backend, self._backend = self._backend, None
        backend.drain()
        backend.leave(why)
        deadline = time.monotonic() + (self._timeout or 0)
        while not backend.peers_gone() and time.monotonic() < deadline:
            time.sleep(0.002)
        if not backend.peers_gone():
            _kept_until_exit.append(backend)


_kept_until_exit: list = []  # backends


def _ptr(out):
    """out's device pointer; 0 where the rank has no output (reduce off the root)."""
    return 0 if out is None else out.ptr


class _Region:
    """What a comm.alloc(device="cuda") array holds on to: the backend that maps its memory.
    Once no array holds it, the region is this rank's to drop."""

    __slots__ = ("backend", "__weakref__")

    def __init__(self, backend):
        self.backend = backend


def _cupy_for_alloc():
    try:
        import cupy
    except ImportError:
        raise ValueError("dpcore: comm.alloc(device=\"cuda\") makes CuPy arrays, and CuPy is "
                         "not installed (pip install cupy-cuda13x)") from None
    return cupy
