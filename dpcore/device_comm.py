"""The Communicator's collectives on CUDA arrays: the same calls, checks and results as on host
arrays, run by the device transport (dpcore.transports.device, csrc/cuda/). Algorithms: one_shot
for calls up to one_shot_bytes per rank (auto's pick there), the ring (auto's past it), and
direct, asked for, on buffers from comm.alloc(..., device="cuda"), which the peers have mapped.
Each call follows the work queued on the caller's current stream before it; it returns once its
kernels have ended, and an async call's Work.wait() returns then too, so the result may be used
on any stream."""
import numpy as np

from .device_arrays import device_index, device_view, empty_like, stream_of
from .dtypes import ALGORITHMS, ALL_GATHER, ALL_REDUCE, BROADCAST, REDUCE_SCATTER, dtype_code
from .shared_memory import agreed_request
from .sharding import shard_range
from .transports import device as device_transport
from .work import Work

ONE_SHOT, RING, DIRECT = (ALGORITHMS[a] for a in ("one_shot", "ring", "direct"))


class DeviceCollectives:
    """One communicator's device side: its backend, made at the first call on CUDA arrays."""

    def __init__(self, comm):
        self._comm = comm
        self._backend = None
        self._device = None
        self._regions = 0  # comm.alloc(device="cuda") buffers made: the next one's id

    # -- the collectives, called by Communicator with x's DeviceArray ----------------------

    def all_reduce(self, x, op, out, algo, async_op):
        codes = self._comm._reduction(x.dtype, op)
        self._check_input(x, "x")
        if out is None:
            result = empty_like(x, x.shape)
            out_v = device_view(result, "out")
        else:
            out_v, result = self._check_out(out, x, x.size, x.shape), out
            if out_v.ptr != x.ptr:
                self._check_apart(x, out_v)
        return self._launch(ALL_REDUCE, *codes, 0, self._algo(algo, x.nbytes), x, out_v,
                            x.size, x.size, result, async_op)

    def reduce_scatter(self, x, op, out, algo, async_op):
        codes = self._comm._reduction(x.dtype, op)
        self._check_input(x, "x")
        start, stop = shard_range(x.size, self._comm.size, self._comm.rank)
        if out is None:
            result = empty_like(x, (stop - start,))
            out_v = device_view(result, "out")
        else:
            out_v, result = self._check_out(out, x, stop - start, None), out
            if out_v.ptr != x.ptr + start * x.dtype.itemsize:  # in place: x's own shard
                self._check_apart(x, out_v)
        return self._launch(REDUCE_SCATTER, *codes, 0, self._algo(algo, x.nbytes), x, out_v,
                            x.size, x.size, result, async_op)

    def all_gather(self, s, out, algo, async_op):
        dtype = dtype_code(s.dtype)
        self._check_input(s, "shard")
        if algo not in ("auto", "one_shot", "ring", "direct"):
            self._algo(algo, 0)  # raises before the shard sizes travel
        if out is None:
            self._comm._reap()
            total = sum(self._checked(s).exchange_counts(dtype, s.size))
            result = empty_like(s, (total,))
            out_v = device_view(result, "out")
        else:
            out_v, result = self._check_out(out, s, None, None), out
            inside = 0 <= s.ptr - out_v.ptr < out_v.nbytes
            if not inside:
                self._check_apart(s, out_v)
        return self._launch(ALL_GATHER, dtype, 0, 0, self._algo(algo, out_v.nbytes), s, out_v,
                            s.size, out_v.size, result, async_op)

    def broadcast(self, x, root, algo, async_op):
        dtype, root = dtype_code(x.dtype), self._comm._root(root)
        self._check_input(x, "x")
        if x.readonly:
            raise ValueError("dpcore: broadcast writes x in place, but x is read-only")
        return self._launch(BROADCAST, dtype, 0, root, self._algo(algo, x.nbytes), x, x,
                            x.size, x.size, x.user, async_op)

    # -- plumbing ----------------------------------------------------------------------------

    def _algo(self, algo, nbytes):
        limit = self._comm.one_shot_bytes
        if algo == "auto":
            return ONE_SHOT if nbytes <= limit else RING
        if algo == "direct":  # the transport checks that the buffers are comm.alloc's
            return DIRECT
        if algo not in ("one_shot", "ring"):
            raise ValueError(f"dpcore: unknown algo {algo!r}; on CUDA arrays: auto, one_shot, "
                             f"ring or direct")
        if algo == "one_shot" and nbytes > limit:
            raise ValueError(f"dpcore: algo 'one_shot' takes at most {limit} bytes per rank, "
                             f"got {nbytes}")
        return ALGORITHMS[algo]

    def _check_input(self, v, what):
        if not v.contiguous:
            raise ValueError(f"dpcore: {what} must be C-contiguous (copy it first, as with "
                             f"cupy.ascontiguousarray)")
        if v.ptr % v.dtype.itemsize:
            raise ValueError(f"dpcore: {what} is not aligned to its {v.dtype.itemsize}-byte "
                             f"elements on the device")
        if self._device is not None and device_index(v) != self._device:
            raise ValueError(f"dpcore: {what} is on CUDA device {device_index(v)}, but this "
                             f"communicator's device is {self._device} (its first CUDA call's)")

    def _check_out(self, out, x, size, shape):
        o = device_view(out, "out")
        if o is None:
            raise TypeError(f"dpcore: out must be on the device as x is, not a "
                            f"{type(out).__name__}")
        if o.dtype != x.dtype:
            raise TypeError(f"dpcore: out has dtype {o.dtype}, expected {x.dtype}")
        if shape is not None and o.shape != shape:
            raise ValueError(f"dpcore: out has shape {o.shape}, expected {shape}")
        if shape is None and size is not None and o.size != size:
            raise ValueError(f"dpcore: out has {o.size} elements, expected {size}")
        self._check_input(o, "out")
        if o.readonly:
            raise ValueError("dpcore: out is read-only")
        return o

    @staticmethod
    def _check_apart(x, out):
        """Out of place, x and out must not overlap: the kernels would read what they wrote."""
        if x.ptr < out.ptr + out.nbytes and out.ptr < x.ptr + x.nbytes:
            raise ValueError(f"dpcore: out partly overlaps x (it starts {out.ptr - x.ptr:+d} "
                             f"bytes from x's start); in place, out must be x itself (all_reduce) "
                             f"or x's own shard (reduce_scatter)")

    def alloc(self, shape, dtype):
        """comm.alloc(..., device="cuda"): this rank's zero-filled buffer of a region that every
        peer maps (CUDA IPC), in which direct reads the peers' data. Collective, as the host
        alloc; the array keeps the device side's memory alive."""
        region, node = self._regions + 1, self._comm._node
        shape, dtype, nbytes = agreed_request(node, shape, dtype, "cuda alloc")
        emulated = self._comm.settings.cuda_emulation
        cupy = None if emulated else _cupy_for_alloc()
        backend = self._checked(device=0 if emulated else cupy.cuda.Device().id)
        size = max(nbytes, 16)  # every rank's region exists, even an empty one
        self._regions = region
        address, handle = backend.alloc_region(size)
        everyone = node.allgather((address, handle), f"cuda alloc: exchange region {region}")
        node.on_every_rank(lambda: backend.map_region(region, size, [h for _, h in everyone],
                                                      [a for a, _ in everyone]),
                           f"cuda alloc: map the peers' buffers of region {region}")
        backend.unlink_slots()  # every peer has mapped it: no name is left to find
        if emulated:
            from . import emulated as module

            return module.at(address, shape, dtype, backend)
        memory = cupy.cuda.UnownedMemory(address, size, backend, self._device)
        return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0))

    def _checked(self, view=None, device=None):
        comm = self._comm
        comm._checked_backend()  # closed, or the wrong thread: raises
        if self._backend is None:
            if device is None:
                device = device_index(view) if view is not None else 0
            self._backend = device_transport.connect(comm._boot, comm._node, comm.settings,
                                                     comm.timeout, device)
            self._device = device
        return self._backend

    def _launch(self, coll, dtype, op, root, algo, x, out, count, total, result, async_op):
        backend = self._checked(x)
        stream = stream_of(x)
        args = (coll, dtype, op, root, algo, x.ptr, out.ptr, count, total, stream)
        if not async_op:
            try:
                backend.run_device(*args)
            except RuntimeError:
                self._comm._orphans.append((x.array, out.array))
                raise
            return result
        work = Work(backend.submit_device(*args), result, x.array, out.array)
        self._comm._pending.append(work)
        return work

    def algo_calls(self):
        return self._backend.algo_calls() if self._backend is not None else [0] * len(ALGORITHMS)

    @property
    def device(self):
        """What the device transport runs on ("cuda:0", "emulated"), or None before a call."""
        return None if self._backend is None else self._backend.device

    def close(self, why):
        """Leave. A peer may still be reading this rank's device memory (the last one_shot
        payload): CUDA leaves freeing memory a peer has mapped undefined, so unless every peer
        has left or died, the backend and its memory stay until the process exits."""
        if self._backend is None:
            return
        backend, self._backend = self._backend, None
        backend.drain()
        backend.leave(why)
        if not backend.peers_gone():
            _kept_until_exit.append(backend)


_kept_until_exit = []


def _cupy_for_alloc():
    try:
        import cupy
    except ImportError:
        raise ValueError("dpcore: comm.alloc(device=\"cuda\") makes CuPy arrays, and CuPy is "
                         "not installed (pip install cupy-cuda13x)") from None
    return cupy
