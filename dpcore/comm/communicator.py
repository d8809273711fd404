"""The Communicator: each collective's argument checks, written once for host and CUDA arrays,
over the path the arrays take (dpcore.comm.path: HostPath or DevicePath).

Every check happens before anything is sent, so bad local input raises TypeError/ValueError on
the rank that made it and leaves the communicator usable; the peers never see the call. The
checked call goes to the path's backend, which matches it with the peers' and runs it. Making a
communicator (the bootstrap, the transport) is dpcore.setup's.
"""
from __future__ import annotations

import atexit
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any, Dict, Literal, Optional, Sequence, Union, overload

import numpy as np
import numpy.typing as npt

from .. import _C, trace
from ..arrays import A
from ..dtypes import (ALGORITHM_NAMES, ALL_GATHER, ALL_REDUCE, BARRIER, BROADCAST, DTYPES,
                      REDUCE, REDUCE_SCATTER, dtype_code)
from ..setup import connect
from ..setup.mpi_comms import release_when_dropped
from ..sharding import shard_range
from . import ending
from .choice import ONE_SHOT, choose, reduction, root_rank
from .device_path import DevicePath
from .exchanges import Exchanges
from .host_path import HostPath
from .p2p import PointToPoint
from .p2p_calls import PointToPointCalls
from .path import Path, View
from .registration import Registration
from .plain import plain_calls
from .work import InFlight, Work

if TYPE_CHECKING:
    from mpi4py import MPI
    from torch.distributed import Store

# alloc's shape, as NumPy takes it
Shape = Union[int, Sequence[int]]

# What a barrier passes for its (unused) buffers.
_EMPTY = np.empty(0, np.uint8)
_EMPTY.flags.writeable = False
_EMPTY_CODE = DTYPES[_EMPTY.dtype]


class Communicator(Exchanges, PointToPointCalls):
    """A group of ranks and the collectives among them (see docs/api.md); gather, scatter and
    all_to_all are Exchanges', send and recv PointToPointCalls', what they share Calls'."""

    algorithms = ("one_shot", "ring")

    def __init__(self, mpi_comm: Optional[MPI.Comm] = None, timeout: Optional[float] = None,
                 store: Optional[Store] = None, rank: Optional[int] = None,
                 size: Optional[int] = None) -> None:
        self._backend = None
        me = threading.current_thread()
        # the only thread that may call
        self._owner, self._owner_name = threading.get_ident(), me.name
        try:
            made = connect.communicator(mpi_comm, timeout, store, rank, size)
        except _C.CommError as e:
            ending.note_failure(e)
            raise
        self.settings, self.timeout, self.mpi = made.settings, made.timeout, made.boot.comm
        self.rank, self.size = made.boot.rank, made.boot.size
        self.local_rank, self.local_size = made.node.rank, made.node.size
        self.transport, self.one_shot_bytes = made.transport, made.one_shot_bytes
        # whether every rank may read every peer's memory: algo "direct" can run
        self.direct = made.direct
        self._boot, self._node, self._backend = made.boot, made.node, made.backend
        self._host = HostPath(made.backend, self.size, self.rank, self.transport,
                              self.one_shot_bytes, self.direct)
        # CUDA arrays' side: its backend is made at their first call
        self._device = DevicePath(made.boot, made.node, made.backend, self.settings, self.timeout,
                                  self.one_shot_bytes)
        self._in_flight = InFlight()
        self._plain_calls = plain_calls(made.backend, self.rank, self.size, self._host.rules,
                                        self._in_flight)
        self._plain = self._plain_calls.entry()
        self._set_owner(self._owner, self._owner_name)
        self._p2p = PointToPoint(made.p2p, self.rank, self.size, self._in_flight,
                                 self._p2p_failed)
        # close() calls it; a communicator dropped without close() frees its MPI ones anyway
        self._release = release_when_dropped(self, made.backend, made.comms, made.boot)
        _live.add(self)
        if trace.enabled():
            trace.watch(self.rank, made.backend, made.trace_gather)

    @overload
    def alloc(self, shape: Shape, dtype: npt.DTypeLike = ...,
              device: Literal["cpu"] = ...) -> npt.NDArray[Any]: ...
    @overload
    def alloc(self, shape: Shape, dtype: npt.DTypeLike = ..., *,
              device: Literal["cuda"]) -> Any: ...  # a CuPy array

    def alloc(self, shape: Shape, dtype: npt.DTypeLike = np.float32,
              device: str = "cpu") -> Any:
        """A zero-filled NumPy array in memory that every rank of this node maps, like NCCL's
        ncclMemAlloc or PyTorch's symmetric memory. Collective: every rank of the communicator
        calls it, in the same order, for the same shape and dtype. Collectives take it like any
        array; algo "direct" (which auto may pick) then reads the peers' data out of it with one
        plain copy instead of a kernel copy. Freed with the last reference to the array (or a
        view of it). Across nodes, or with one rank, it is ordinary memory. device="cuda": a
        CuPy array on this rank's GPU that every peer maps through CUDA IPC, which algo
        "direct" on CUDA arrays needs; it lives as long as the communicator's device side."""
        if device not in ("cpu", "cuda"):
            raise ValueError(f"dpcore: alloc's device is 'cpu' or 'cuda', not {device!r}")
        backend = self._checked_backend()  # raises once closed
        if device == "cuda":
            return self._device.alloc(shape, dtype)
        from ..setup.segments import alloc

        try:
            return alloc(self._node, self.transport, backend, shape, dtype)
        except _C.CommError:  # a peer died or left: the ranks in collectives hear it too
            backend.pass_on(self._boot.news or f"rank {self.rank} failed in alloc")
            raise

    def register(self, x: Any) -> Registration:
        """Maps the memory of CUDA array x into every peer of this node, once, as NCCL's
        ncclCommRegister: then algo="direct" reads and writes it in place, one kernel per call,
        as on comm.alloc(device="cuda") buffers (what the peers read must be mapped so: x, and
        all_reduce's out, which they write). Collective: every rank registers its buffer, in
        the same order. It takes memory from cudaMalloc, as CuPy's default pool and torch's
        caching allocator give it (CUDA IPC of the allocation that holds x). The registration
        holds x until comm.deregister(it), the end of a `with comm.register(x):` block, or
        close(); dropped before, x is kept until the next register, alloc or close. Host arrays
        need none (direct reads them where they are): theirs maps nothing."""
        self._checked_backend()  # raises once closed
        return self._device.register(x)

    def deregister(self, registration: Registration) -> None:
        """Collectively, once the calls queued on this communicator have ended, every rank
        unmaps the registration's buffers and lets x go: from then on it may be freed. Again,
        or after close(), it does nothing."""
        if self._backend is not None:
            self._checked_backend()  # the owner's thread
        self._device.deregister(registration)

    # -- collectives ------------------------------------------------------------------------

    @overload
    def all_reduce(self, x: A, op: str = ..., out: Optional[A] = ..., algo: str = ...,
                   async_op: Literal[False] = ...) -> A: ...
    @overload
    def all_reduce(self, x: A, op: str = ..., out: Optional[A] = ..., algo: str = ..., *,
                   async_op: Literal[True]) -> Work[A]: ...

    def all_reduce(self, x: Any, op: str = "sum", out: Any = None, algo: str = "auto",
                   async_op: bool = False) -> Any:
        """The elementwise reduction (op: sum, prod, max, min, avg) of every rank's x, in x's
        shape and array type, on every rank. A new array unless out is given; out=x works in
        place (unlike torch.distributed, all_reduce(x) leaves x as it is). algo: "auto",
        "one_shot", "ring" or "direct". async_op=True returns a Work; wait() gives the result.
        CUDA arrays (CuPy, torch, __cuda_array_interface__) run on the device."""
        done = self._plain(ALL_REDUCE, x, out, 0, op, algo, async_op)
        if done is not NotImplemented:  # a user's loop's call, checked and run in one step
            return done
        path, a, wrap = self._view(x, "x")
        dtype, opc = reduction(a.dtype, op)
        path.check(a, "x")
        out_a, result = self._output(path, a, wrap, x, out, 0, a.shape)
        return self._launch(path, ALL_REDUCE, dtype, opc, 0,
                            choose(algo, "all_reduce", a.nbytes, path.rules), a, out_a, a.size,
                            a.size, result, async_op)

    @overload
    def reduce(self, x: A, root: int = ..., op: str = ..., out: Optional[A] = ...,
               algo: str = ..., async_op: Literal[False] = ...) -> Optional[A]: ...
    @overload
    def reduce(self, x: A, root: int = ..., op: str = ..., out: Optional[A] = ...,
               algo: str = ..., *, async_op: Literal[True]) -> Work[Optional[A]]: ...

    def reduce(self, x: Any, root: int = 0, op: str = "sum", out: Any = None,
               algo: str = "auto", async_op: bool = False) -> Any:
        """The elementwise reduction of every rank's x (as all_reduce), on root alone: there in
        x's shape and array type, a new array unless out is given (out=x: in place). Other
        ranks get None, leave x as it is, and must pass out=None. algo: "auto", "one_shot",
        "ring" (a chain to the root) or "direct" (the root reads the peers' x); ring and
        direct give the same bits."""
        done = self._plain(REDUCE, x, out, root, op, algo, async_op)
        if done is not NotImplemented:  # as all_reduce's
            return done
        path, a, wrap = self._view(x, "x")
        dtype, opc = reduction(a.dtype, op)
        path.check(a, "x")
        root = root_rank(root, self.size, "reduce")
        if self.rank != root and out is not None:
            raise ValueError(f"dpcore: reduce's result is root {root}'s alone; out must be None "
                             f"on rank {self.rank}")
        out_a, result = (self._output(path, a, wrap, x, out, 0, a.shape) if self.rank == root
                         else (None, None))
        return self._launch(path, REDUCE, dtype, opc, root,
                            choose(algo, "reduce", a.nbytes, path.rules), a, out_a, a.size,
                            a.size, result, async_op)

    @overload
    def reduce_scatter(self, x: A, op: str = ..., out: Optional[A] = ...,
                       async_op: Literal[False] = ..., algo: str = ...) -> A: ...
    @overload
    def reduce_scatter(self, x: A, op: str = ..., out: Optional[A] = ..., *,
                       async_op: Literal[True], algo: str = ...) -> Work[A]: ...

    def reduce_scatter(self, x: Any, op: str = "sum", out: Any = None,
                       async_op: bool = False, algo: str = "auto") -> Any:
        """This rank's part of the reduction of every rank's x, flattened: the 1-D slice
        dpcore.shard_range(x.size, size, rank) (shards differ by at most one element). out may
        be that slice of x itself (in place)."""
        path, a, wrap = self._view(x, "x")
        dtype, opc = reduction(a.dtype, op)
        path.check(a, "x")
        start, stop = shard_range(a.size, self.size, self.rank)
        out_a, result = self._output(path, a, wrap, x, out, start * a.dtype.itemsize,
                                     (stop - start,), any_shape=True)
        return self._launch(path, REDUCE_SCATTER, dtype, opc, 0,
                            choose(algo, "reduce_scatter", a.nbytes, path.rules), a, out_a,
                            a.size, a.size, result, async_op)

    @overload
    def all_gather(self, s: A, out: Optional[A] = ..., async_op: Literal[False] = ...,
                   algo: str = ...) -> A: ...
    @overload
    def all_gather(self, s: A, out: Optional[A] = ..., *, async_op: Literal[True],
                   algo: str = ...) -> Work[A]: ...

    def all_gather(self, s: Any, out: Any = None, async_op: bool = False,
                   algo: str = "auto") -> Any:
        """Every rank's 1-D shard s, concatenated in rank order, on every rank. Shards may
        differ in length; out may hold this rank's shard at its place (in place)."""
        path, a, wrap = self._view(s, "shard")
        dtype = dtype_code(a.dtype)
        path.check(a, "shard")
        if algo != "auto":
            choose(algo, "all_gather", 0, path.rules)  # raises before the shard sizes travel
        if out is None:
            self._checked_backend()  # raises once closed
            self._in_flight.reap()
            total = sum(path.exchange_counts(ALL_GATHER, 0, dtype, a.size, a))
            out_a, result = path.empty(a, (total,), wrap)
        else:
            out_a, result = path.out_view(out, "out"), out
            self._check_out(path, out_a, a.dtype, None, None, "out")
            # the shard may lie in out only whole and on an element boundary: the in-place
            # form, which C++ checks with every rank's shard length (csrc/core/call.h, misfit)
            offset = path.overlap(out_a, a)
            if offset is not None and not (0 <= offset and offset + a.nbytes <= out_a.nbytes
                                           and offset % out_a.dtype.itemsize == 0):
                raise ValueError(f"dpcore: the shard partly overlaps out (it starts "
                                 f"{offset:+d} bytes from out's start); in place, it must be "
                                 f"its rank's own slice of out")
        return self._launch(path, ALL_GATHER, dtype, 0, 0,
                            choose(algo, "all_gather", out_a.nbytes, path.rules), a, out_a,
                            a.size, out_a.size, result, async_op)

    @overload
    def broadcast(self, x: A, root: int = ..., algo: str = ...,
                  async_op: Literal[False] = ...) -> A: ...
    @overload
    def broadcast(self, x: A, root: int = ..., algo: str = ..., *,
                  async_op: Literal[True]) -> Work[A]: ...

    def broadcast(self, x: Any, root: int = 0, algo: str = "auto",
                  async_op: bool = False) -> Any:
        """root's x into every rank's x, in place; returns x."""
        done = self._plain(BROADCAST, x, None, root, None, algo, async_op)
        if done is not NotImplemented:  # as all_reduce's
            return done
        path, a, _ = self._view(x, "x")
        dtype, root = self._check_broadcast(path, a, root)
        return self._launch(path, BROADCAST, dtype, 0, root,
                            choose(algo, "broadcast", a.nbytes, path.rules), a, a, a.size,
                            a.size, x, async_op)

    def barrier(self) -> None:
        """Returns once every rank has called it."""
        if self._plain(BARRIER, _EMPTY, None, 0, None, "auto", False) is NotImplemented:
            self._launch(self._host, BARRIER, _EMPTY_CODE, 0, 0, ONE_SHOT, _EMPTY, _EMPTY, 0, 0,
                         None, False)

    def _check_broadcast(self, path: Path, a: View, root: int) -> tuple[int, int]:
        dtype = dtype_code(a.dtype)
        path.check(a, "x")
        root = root_rank(root, self.size)
        if not path.writable(a):
            raise ValueError("dpcore: broadcast writes x in place, but x is read-only")
        return dtype, root

    # -- plumbing ---------------------------------------------------------------------------

    def algorithm_for(self, coll: str, nbytes: int, algo: str = "auto") -> str:
        """The name of the algorithm a host call of nbytes (the whole buffer) runs: algo itself,
        or what "auto" picks as far as this rank decides it ("auto" past one_shot's band where
        rank 0 times the ring against direct)."""
        return ALGORITHM_NAMES[choose(algo, coll, nbytes, self._host.rules)]

    def algorithm_calls(self) -> Dict[str, int]:
        """{algorithm: how many collectives it ran} on this communicator so far, with auto's
        picks resolved ("ring", "direct", ...)."""
        self._checked_backend()
        calls = [h + d for h, d in zip(self._host.algo_calls(), self._device.algo_calls())]
        return {ALGORITHM_NAMES[code]: k for code, k in enumerate(calls) if k}

    def device_counts(self) -> Optional[Dict[str, int]]:
        """What this communicator's kernels on CUDA arrays moved so far, counted at each launch
        (alike on a GPU and in the emulation): kernels, host_waits (the host waited for a
        kernel's end), bytes_read, bytes_written, and packed_bytes (of those, through 16-byte
        packs); None before its first call on CUDA arrays. docs/busbw.md: the floor."""
        self._checked_backend()
        return self._device.counts()

    @property
    def device(self) -> Optional[str]:
        """What this communicator's CUDA arrays run on ("cuda:0", "emulated"), or None before
        its first call on them."""
        return self._device.device

    def close(self) -> None:
        """Finish queued collectives, tell the peers this rank makes no more calls, unmap the
        segment, free the MPI communicators."""
        backend = self._backend
        if backend is None:
            return
        why = "closed its communicator"
        self._device.close(why)
        failed = self._p2p.close()  # its pending ops finish, or fail at their deadlines
        if failed:
            backend.pass_on(failed)
        backend.drain()
        if trace.enabled():
            trace.collect(backend)
        # tell the peers this rank makes no more calls: in collectives, and in alloc
        backend.leave(why)
        self._boot.leave(why)
        self._in_flight.clear()
        self._backend = None
        self._plain_calls.close()  # its calls now take the full checks, which refuse them
        _live.discard(self)
        self._release()

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<dpcore.Communicator rank {self.rank}/{self.size} local "
                f"{self.local_rank}/{self.local_size} transport={self.transport}>")


# Communicators not closed yet. A rank that exits without closing one says so to its peers (at
# exit, before MPI finalizes), so that none waits for it until its timeout: the process lives on
# in MPI_Finalize, waiting for them. Where a call failed, it then ends without MPI_Finalize
# (ending.py).
_live: weakref.WeakSet[Communicator] = weakref.WeakSet()


@atexit.register
def _leave_at_exit() -> None:
    if not _live:  # none made: MPI need not even be importable
        ending.end()
        return
    mpi = sys.modules.get("mpi4py.MPI")  # imported where a communicator was made over MPI
    finalized = mpi is not None and mpi.Is_finalized()
    why = "exited without closing its communicator"
    for comm in list(_live):
        if comm._backend is not None and not (finalized and comm.mpi is not None):
            comm._boot.leave(why)  # peers in alloc
            try:
                comm._device.close(why)
                comm._backend.leave(why)
            except Exception:  # a failed call is already the peers' news
                pass
    ending.end(any(comm._in_flight.failed() for comm in list(_live)))


def init(mpi_comm: Optional[MPI.Comm] = None, timeout: Optional[float] = None, *,
         store: Optional[Store] = None, rank: Optional[int] = None,
         size: Optional[int] = None) -> Communicator:
    """A communicator over mpi_comm (MPI.COMM_WORLD by default); 1 rank without mpiexec. Or,
    with no MPI in the job (under torchrun), over a torch.distributed Store shared by `size`
    processes, this one `rank`: every rank on one host (shared memory). One store (or
    PrefixStore) per group of ranks: each rank counts its communicators in it."""
    return Communicator(mpi_comm, timeout=timeout, store=store, rank=rank, size=size)
