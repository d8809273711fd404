"""The device path: collectives on CUDA arrays (CuPy, torch, __cuda_array_interface__), run by the
device transport (dpcore.setup.device_transport, csrc/cuda/), which is connected at the first
call on CUDA arrays. Algorithms: one_shot for calls up to one_shot_bytes per rank (auto's pick
there), the ring (auto's past it), and direct, asked for, on buffers the peers have mapped
(the transport checks that): regions, comm.alloc(..., device="cuda")'s and comm.register's.
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
from .registration import Registration


class DevicePath:
    """One communicator's device side (dpcore.comm.path.Path): its backend is made at the first
    call on CUDA arrays, on every rank at once, as that call is."""

    def __init__(self, boot, node, host, settings, timeout, one_shot_bytes):
        """host: the communicator's host backend, whose count of calls this side shares."""
        self._boot, self._node, self._settings, self._timeout = boot, node, settings, timeout
        self._host = host
        self._backend = None
        self._device = None  # the CUDA device of the first call's arrays
        # regions: comm.alloc(device="cuda")'s buffers and comm.register's, numbered alike
        self._regions = 0  # made: the last one's id
        self._mapped = set()  # ids of those mapped here
        self._dropped = set()  # ids of those this rank has let go (their arrays, or registrations)
        self._held = {}  # region: the array of a registration dropped, kept until unmapped
        self._live = {}  # region: a live registration's finalizer (which holds its array)
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
                                                      [a for a, _ in everyone],
                                                      [0] * node.size, True),
                           f"cuda alloc: map the peers' buffers of region {region}")
        self._mapped.add(region)
        backend.unlink_slots()  # every peer has mapped it: no name is left to find
        owner = _Region(backend)  # held by the array and its views
        weakref.finalize(owner, self._dropped.add, region)
        if emulated:
            from .. import emulated as module

            return module.at(address, shape, dtype, owner)
        memory = cupy.cuda.UnownedMemory(address, size, owner, self._device)
        return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0))

    def register(self, x):
        """Communicator.register: x's memory mapped by every peer of the node, under a region
        of its own. Collective; a rank's bad buffer is a ValueError there, and on the peers one
        that names it, before anything is mapped."""
        node = self._node
        view, kinds = node.agree(lambda: self._registrable(x), "register: check the buffers",
                                 share=lambda v: v is not None)
        if not any(kinds):
            return Registration(x, None, self.deregister)  # host arrays: nothing to map
        if not all(kinds):
            hosts = [r for r, cuda in zip(node.ranks, kinds) if not cuda]
            raise ValueError(f"dpcore register: every rank registers a CUDA array or every rank "
                             f"a host array; ranks {hosts} passed host arrays")
        backend = self._connected(view)
        self._free_dropped(node, backend)
        self._regions += 1
        region = self._regions
        _, everyone = node.agree(lambda: backend.export_buffer(view.ptr, view.nbytes) +
                                 (view.ptr,), "register: export the buffers", share=lambda e: e)
        try:
            node.on_every_rank(lambda: backend.map_region(
                region, view.nbytes, [h for h, _, _ in everyone], [a for _, _, a in everyone],
                [o for _, o, _ in everyone], False), "register: map the peers' buffers")
        except RuntimeError:  # a rank could not map a peer's: where one could, it unmaps
            backend.unmap_region(region)
            raise
        self._mapped.add(region)
        registration = Registration(x, region, self.deregister)
        # dropped without deregister: its array stays until the ranks agree to unmap it
        self._live[region] = weakref.finalize(registration, self._let_go, region, x)
        return registration

    def _registrable(self, x):
        """x's DeviceArray (None: a host array), checked as a call's x is."""
        view = device_view(x, "x")
        if view is not None:
            self.check(view, "x")
        return view

    def _let_go(self, region, array):
        del self._live[region]
        self._held[region] = array
        self._dropped.add(region)

    def deregister(self, registration):
        """Communicator.deregister: collectively, after the calls queued here (which may read
        it), every rank unmaps the peers' buffers of the registration's region; then each
        lets its array go, free to be freed."""
        region = registration.region
        live = self._live.get(region)
        if live is None or live.peek()[0] is not registration:
            if region is not None and registration.array is not None:  # live, elsewhere
                raise ValueError("dpcore: deregister: that registration is another "
                                 "communicator's")
            registration.array = None  # a host array's; or deregistered already, or closed
            return
        backend, node = self._backend, self._node
        backend.drain()
        node.on_every_rank(lambda: backend.unmap_region(region),
                           "deregister: unmap the peers' buffers")
        self._mapped.discard(region)
        self._live.pop(region).detach()  # and with it the array
        registration.array = None

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
            backend.free_region(r)  # comm.alloc's; a registration's array goes with _held
            self._held.pop(r, None)
        self._mapped -= common
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
        # the peers' buffers unmapped before we leave, so that a peer that sees us gone may
        # free its own; ours, the registrations' arrays too, are let go once the peers are gone
        for region in sorted(self._mapped):
            backend.unmap_region(region)
        self._mapped.clear()
        registered = []
        for finalizer in list(self._live.values()):
            detached = finalizer.detach()  # None where it ran meanwhile: then in _held
            if detached:
                registration, _, (_, array), _ = detached
                registration.array = None
                registered.append(array)
        self._live.clear()
        registered += self._held.values()
        self._held.clear()
        backend.leave(why)
        deadline = time.monotonic() + (self._timeout or 0)
        while not backend.peers_gone() and time.monotonic() < deadline:
            time.sleep(0.002)
        if not backend.peers_gone():
            _kept_until_exit.append((backend, registered))


_kept_until_exit: list = []  # (backend, registered arrays)


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
