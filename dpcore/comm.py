"""The Communicator: bootstrap (over MPI, or a torch.distributed Store), transport choice,
argument checks, results as arrays.

Every check happens before anything is sent, so bad local input raises TypeError/ValueError on
the rank that made it and leaves the communicator usable; the peers never see the call. The
checked call goes to the transport's backend (dpcore.backend.Backend, made by
dpcore.transports.connect), which matches it with the peers' and runs it.
"""
import atexit
import numbers
import sys
import threading
import weakref
from threading import get_ident

import numpy as np

from . import _C
from . import settings as _settings
from . import trace, transports
from .arrays import as_numpy, check_contiguous, check_in_place, check_out, check_shard_in_out
from .bootstrap import Bootstrap
from .cost import auto as _auto
from .device_arrays import device_view
from .device_comm import DeviceCollectives
from .dtypes import (ALGORITHM_NAMES, ALGORITHMS, ALL_GATHER, ALL_REDUCE, AVG, BARRIER,
                     BROADCAST, DTYPES, FLOATING, OPS, REDUCE_SCATTER, dtype_code)
from .mpi_comms import release_when_dropped
from .sharding import shard_range
from .store_wire import StoreWire, refuse_what_needs_mpi, trace_gather
from .work import Work

ONE_SHOT, RING, DIRECT, AUTO = (ALGORITHMS[a] for a in ("one_shot", "ring", "direct", "auto"))
# Where the ranks may read each other's memory (comm.direct), every rank can copy straight from
# the peers' buffers: one copy where the ring's FIFO takes two. auto runs one_shot for small
# calls (dpcore.cost.auto) and past them whichever of the ring and direct rank 0 has lately
# timed faster (csrc/core/tuner.h), or, with DPCORE_TUNE=0, picks by fixed thresholds.
_DIRECT_COLLECTIVES = ("all_gather", "broadcast", "all_reduce", "reduce_scatter")

# (dtype, op) -> (dtype code, op code) of the reductions called so far: one lookup on the path
# of every call (_check_reduction fills it)
_REDUCTIONS = {}

# What a barrier passes for its (unused) buffers.
_EMPTY = np.empty(0, np.uint8)
_EMPTY.flags.writeable = False
_EMPTY_CODE = DTYPES[_EMPTY.dtype]


class Communicator:
    """A group of ranks and the collectives among them (see docs/api.md)."""

    algorithms = ("one_shot", "ring")

    def __init__(self, mpi_comm=None, timeout=None, store=None, rank=None, size=None):
        self._backend = None
        me = threading.current_thread()
        self._owner, self._owner_name = me.ident, me.name  # the only thread that may call
        wire = _wire(mpi_comm, store, rank, size)
        try:  # a bad setting or timeout raises here, but only once the peers can be told
            self.settings, wrong = _settings.load(), None
            self.timeout = (self.settings.timeout if timeout is None else
                            _settings.timeout_seconds(timeout))
        except (TypeError, ValueError) as e:
            self.timeout, wrong = _settings.Settings().timeout, e
        # Every exchange from here on is point to point with a deadline (dpcore.bootstrap): a
        # blocking MPI call would wait forever for a rank that died.
        boot = self._boot = Bootstrap(wire, self.timeout)
        try:
            if wrong is not None:
                raise wrong
            self._connect(boot)
        except BaseException as e:
            boot.fail(e)  # the peers raise too, instead of waiting for this rank
            raise
        _live.add(self)
        if trace.enabled():
            trace.watch(self.rank, self._backend,
                        None if boot.comm is not None else trace_gather(boot.wire, self.timeout))

    def _connect(self, boot):
        self._mpi = boot.comm  # for tools that exchange a little over MPI (dpcore.cost fit)
        self.rank, self.size = boot.rank, boot.size
        if boot.comm is None:  # made on a store: no MPI to carry anything past shared memory
            refuse_what_needs_mpi(boot, self.settings)
        nodes = _nodes(boot, self.settings.node_size)
        self._node = boot.group(next(n for n in nodes if self.rank in n))
        self.local_rank, self.local_size = self._node.rank, self._node.size
        self.transport = transports.choose(self.settings.transport, boot, self._node)
        _auto.agree(boot.world)  # every rank chooses by rank 0's fitted cost model
        # one_shot's slot: the most bytes per rank it takes (local rank 0's setting, as the
        # segment is made by it)
        self.one_shot_bytes = self._node.bcast(self.settings.one_shot_bytes, 0,
                                               "init: agree on one_shot's slot")
        self._auto_bands = _auto.bands(self.size, self.one_shot_bytes, self.transport)
        self._pending = []
        # The arrays of calls that failed, kept for good: over MPI a send of a failed call may
        # still read its buffer when a late peer comes.
        self._orphans = []
        connection = transports.connect(self.transport, boot, nodes, self.settings,
                                        self.timeout)
        self._backend = connection.backend
        # close() calls it; a communicator dropped without close() frees its MPI ones anyway
        comms = [c for c in (*connection.comms, boot.comm) if c is not None]
        self._release = release_when_dropped(self, self._backend, comms, boot)
        # whether every rank may read every peer's memory: algo "direct" can run
        self.direct = connection.direct
        self._devices = DeviceCollectives(self)  # CUDA arrays' backend, made at their first call

    def alloc(self, shape, dtype=np.float32, device="cpu"):
        """A zero-filled NumPy array in memory that every rank of this node maps, like NCCL's
        ncclMemAlloc or PyTorch's symmetric memory. Collective: every rank of the communicator
        calls it, in the same order, for the same shape and dtype. Collectives take it like any
        array; algo "direct" (which auto may pick) then reads the peers' data out of it with one
        plain copy instead of a kernel copy. Freed with the last reference to the array (or a
        view of it). Across nodes, or with one rank, it is ordinary memory. device="cuda": a
        CuPy array on this rank's GPU that every peer maps through CUDA IPC, which algo
        "direct" on CUDA arrays needs; it lives as long as the communicator's device side."""
        if device == "cuda":
            return self._devices.alloc(shape, dtype)
        if device != "cpu":
            raise ValueError(f"dpcore: alloc's device is 'cpu' or 'cuda', not {device!r}")
        from .shared_memory import alloc

        backend = self._checked_backend()  # raises once closed
        try:
            return alloc(self, shape, dtype)
        except _C.CommError:  # a peer died or left: the ranks in collectives hear it too
            backend.pass_on(self._boot.news or f"rank {self.rank} failed in alloc")
            raise

    # -- collectives ------------------------------------------------------------------------

    def all_reduce(self, x, op="sum", out=None, algo="auto", async_op=False):
        """The elementwise reduction (op: sum, prod, max, min, avg) of every rank's x, in x's
        shape and array type, on every rank. A new array unless out is given; out=x works in
        place (unlike torch.distributed, all_reduce(x) leaves x as it is). algo: "auto",
        "one_shot", "ring" or "direct". async_op=True returns a Work; wait() gives the result.
        CUDA arrays (CuPy, torch, __cuda_array_interface__) run on the device (device_comm)."""
        if type(x) is np.ndarray:
            a, wrap = x, None
        else:
            view = device_view(x)
            if view is not None:
                return self._devices.all_reduce(view, op, out, algo, async_op)
            a, wrap = as_numpy(x)
        codes = _REDUCTIONS.get((a.dtype, op))
        if codes is not None and type(out) is np.ndarray and _C.fits_out(a, out):
            # the call of a user's loop, checked in one step: it is all of a small call's cost
            return self._launch(ALL_REDUCE, *codes, 0, self._algo(algo, a.nbytes), a, out,
                                a.size, a.size, out, async_op)
        dtype, opc = self._check_reduction(a, op)
        if out is None:
            out_a = np.empty_like(a)
            result = wrap(out_a) if wrap else out_a
        elif out is x:  # in place: x was checked above, but must be writable
            if not a.flags.writeable:
                raise ValueError("dpcore: out is read-only")
            out_a, result = a, out
        else:
            out_a, result = check_out(out, a.dtype, a.size, a.shape), out
            check_in_place(a, out_a)
        return self._launch(ALL_REDUCE, dtype, opc, 0, self._algo(algo, a.nbytes), a, out_a,
                            a.size, a.size, result, async_op)

    def reduce_scatter(self, x, op="sum", out=None, async_op=False, algo="auto"):
        """This rank's part of the reduction of every rank's x, flattened: the 1-D slice
        dpcore.shard_range(x.size, size, rank) (shards differ by at most one element). out may
        be that slice of x itself (in place)."""
        view = None if type(x) is np.ndarray else device_view(x)
        if view is not None:
            return self._devices.reduce_scatter(view, op, out, algo, async_op)
        a, wrap = (x, None) if type(x) is np.ndarray else as_numpy(x)
        dtype, opc = self._check_reduction(a, op)
        start, stop = shard_range(a.size, self.size, self.rank)
        if out is None:
            out_a = np.empty(stop - start, a.dtype)
            result = wrap(out_a) if wrap else out_a
        else:
            out_a, result = check_out(out, a.dtype, stop - start, None), out
            check_in_place(a, out_a, start * a.itemsize)  # in place: out is x's shard
        return self._launch(REDUCE_SCATTER, dtype, opc, 0,
                            self._algo(algo, a.nbytes, "reduce_scatter"), a, out_a,
                            a.size, a.size, result, async_op)

    def all_gather(self, s, out=None, async_op=False, algo="auto"):
        """Every rank's 1-D shard s, concatenated in rank order, on every rank. Shards may
        differ in length; out may hold this rank's shard at its place (in place)."""
        view = None if type(s) is np.ndarray else device_view(s, "shard")
        if view is not None:
            return self._devices.all_gather(view, out, algo, async_op)
        a, wrap = (s, None) if type(s) is np.ndarray else as_numpy(s, "shard")
        dtype = dtype_code(a.dtype)
        check_contiguous(a, "shard")
        a = a.reshape(-1)
        if algo != "auto" and algo not in self.algorithms:
            self._algo(algo, 0, "all_gather")  # raises before the shard sizes travel
        if out is None:
            self._reap()
            total = sum(self._checked_backend().exchange_counts(dtype, a.size))
            out_a = np.empty(total, a.dtype)
            result = wrap(out_a) if wrap else out_a
        else:
            out_a = check_out(out, a.dtype, None, None).reshape(-1)
            check_shard_in_out(a, out_a)
            result = out
        return self._launch(ALL_GATHER, dtype, 0, 0, self._algo(algo, out_a.nbytes, "all_gather"),
                            a, out_a, a.size, out_a.size, result, async_op)

    def broadcast(self, x, root=0, algo="auto", async_op=False):
        """root's x into every rank's x, in place; returns x."""
        if type(x) is np.ndarray:
            a = x
        else:
            view = device_view(x)
            if view is not None:
                return self._devices.broadcast(view, root, algo, async_op)
            a = as_numpy(x)[0]
        # One test for the common case keeps small calls cheap: where ranks share cores, each
        # rank's Python time costs about three times over. The slow path names what is wrong.
        flags, dtype = a.flags, DTYPES.get(a.dtype)
        if (dtype is None or not (flags.c_contiguous and flags.writeable) or type(root) is not int
                or not 0 <= root < self.size):
            dtype, root = self._check_broadcast(a, root)
        return self._launch(BROADCAST, dtype, 0, root, self._algo(algo, a.nbytes, "broadcast"),
                            a, a, a.size, a.size, x, async_op)

    def _check_broadcast(self, a, root):
        dtype = dtype_code(a.dtype)
        check_contiguous(a, "x")
        root = self._root(root)
        if not a.flags.writeable:
            raise ValueError("dpcore: broadcast writes x in place, but x is read-only")
        return dtype, root

    def _root(self, root):
        if not isinstance(root, (int, np.integer)) or not 0 <= root < self.size:
            raise ValueError(f"dpcore: broadcast root {root!r} is not a rank in [0, {self.size})")
        return int(root)

    def barrier(self):
        """Returns once every rank has called it."""
        self._launch(BARRIER, _EMPTY_CODE, 0, 0, ONE_SHOT, _EMPTY, _EMPTY, 0, 0, None, False)

    # -- plumbing ---------------------------------------------------------------------------

    @staticmethod
    def _check_reduction(a, op):
        codes = Communicator._reduction(a.dtype, op)
        if not a.flags.c_contiguous:
            check_contiguous(a, "x")
        return codes

    @staticmethod
    def _reduction(dtype, op):
        """(dtype code, op code), or TypeError / ValueError that says what is wrong."""
        codes = _REDUCTIONS.get((dtype, op))
        return codes if codes is not None else _reduction_codes(dtype, op)

    def _algo(self, algo, nbytes, coll="all_reduce"):
        """The algorithm code to run: algo "auto" resolved as far as this rank decides it."""
        if algo == "auto":  # one_shot inside the band dpcore.cost.auto derived from the fit
            lo, hi = self._auto_bands.get(coll) or _auto.fill(
                coll, nbytes, self.size, self.one_shot_bytes, self.rank, self.transport)
            if lo <= nbytes <= hi:
                return ONE_SHOT
            return AUTO if self.direct else RING
        if algo == "direct":
            if coll not in _DIRECT_COLLECTIVES:
                raise ValueError(f"dpcore: algo 'direct' does not run {coll}")
            if not self.direct:
                raise ValueError("dpcore: algo 'direct' needs ranks on one node that may read each "
                                 "other's memory (process_vm_readv); not available here")
            return DIRECT
        if algo not in self.algorithms:
            raise ValueError(f"dpcore: unknown algo {algo!r}; expected auto or one of "
                             f"{', '.join(self.algorithms)}, or direct (all_gather, broadcast)")
        if algo == "one_shot" and nbytes > self.one_shot_bytes:
            raise ValueError(f"dpcore: algo 'one_shot' takes at most {self.one_shot_bytes} "
                             f"bytes per rank, got {nbytes}")
        return ALGORITHMS[algo]

    def algorithm_calls(self):
        """{algorithm: how many collectives it ran} on this communicator so far, with auto's
        picks resolved ("ring", "direct", ...)."""
        calls = self._checked_backend().algo_calls()
        device = self._devices.algo_calls()  # CUDA arrays' calls count alike
        return {ALGORITHM_NAMES[code]: k + device[code] for code, k in enumerate(calls)
                if k + device[code]}

    def _checked_backend(self):
        if self._backend is None:
            raise ValueError("dpcore: the communicator is closed")
        if self._owner != get_ident():
            self._claim()  # raises
        return self._backend

    def _claim(self):
        """A communicator belongs to the thread that created it, as an NCCL communicator to one
        thread: calls from two threads would meet the peers' calls in different orders and
        silently mix their data. (Not the thread of its first call: that may differ from rank
        to rank.)"""
        me = threading.current_thread()
        raise RuntimeError(f"dpcore: this communicator belongs to thread {self._owner_name!r}, "
                           f"which created it; a call from thread {me.name!r} could meet the "
                           f"peers' calls out of order. Create a communicator in the thread "
                           f"that uses it (dpcore.init there, in the same order on every rank)")

    def _launch(self, coll, dtype, op, root, algo, a, out_a, count, total, result, async_op):
        backend = self._backend
        if backend is None or self._owner != get_ident():
            self._checked_backend()  # raises
        if not async_op:
            try:
                backend.run(coll, dtype, op, root, algo, a, out_a, count, total)
            except RuntimeError:
                self._orphans.append((a, out_a))
                raise
            return result
        self._reap()
        work = Work(backend.submit(coll, dtype, op, root, algo, a, out_a, count, total),
                    result, a, out_a)
        self._pending.append(work)  # keeps the arrays alive even if the caller drops the Work
        return work

    def _reap(self):
        if self._pending:
            self._orphans += [w._keep_alive for w in self._pending if w.failed()]
            self._pending = [w for w in self._pending if not w.done()]

    def close(self):
        """Finish queued collectives, tell the peers this rank makes no more calls, unmap the
        segment, free the MPI communicators."""
        if self._backend is None:
            return
        self._devices.close("closed its communicator")
        self._backend.drain()
        if trace.enabled():
            trace.collect(self._backend)
        self._backend.leave("closed its communicator")
        self._boot.leave("closed its communicator")  # peers in alloc stop waiting for it
        self._pending = []
        self._backend = None
        _live.discard(self)
        self._release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"<dpcore.Communicator rank {self.rank}/{self.size} local "
                f"{self.local_rank}/{self.local_size} transport={self.transport}>")


def _reduction_codes(dtype, op):
    """(dtype code, op code) of a reduction dpcore runs, remembered in _REDUCTIONS; TypeError or
    ValueError says what is wrong otherwise."""
    code = dtype_code(dtype)  # raises the full message
    opc = OPS.get(op) if isinstance(op, str) else None
    if opc is None:
        raise ValueError(f"dpcore: unknown op {op!r}; expected one of {', '.join(OPS)}")
    if opc == AVG and code not in FLOATING:
        raise TypeError(f"dpcore: op 'avg' needs a floating dtype, not {dtype}")
    _REDUCTIONS[(dtype, op)] = code, opc
    return code, opc


def _nodes(boot, node_size):
    """The world ranks of each node, in order of their first rank: the ranks of a host, or
    with DPCORE_NODE_SIZE=k, virtual nodes of k consecutive ranks."""
    keys = [r // node_size for r in range(boot.size)] if node_size > 0 else boot.hosts
    nodes = {}
    for r, key in enumerate(keys):
        nodes.setdefault(key, []).append(r)
    return list(nodes.values())


# Communicators not closed yet. A rank that exits without closing one says so to its peers (at
# exit, before MPI finalizes), so that none waits for it until its timeout: the process lives on
# in MPI_Finalize, waiting for them.
_live = weakref.WeakSet()


@atexit.register
def _leave_at_exit():
    if not _live:  # none made: MPI need not even be importable
        return
    mpi = sys.modules.get("mpi4py.MPI")  # imported where a communicator was made over MPI
    finalized = mpi is not None and mpi.Is_finalized()
    for comm in list(_live):
        if comm._backend is not None and not (finalized and comm._boot.comm is not None):
            comm._boot.leave("exited without closing its communicator")  # peers in alloc
            try:
                comm._devices.close("exited without closing its communicator")
                comm._backend.leave("exited without closing its communicator")
            except Exception:  # a failed call is already the peers' news
                pass


def init(mpi_comm=None, timeout=None, *, store=None, rank=None, size=None):
    """A communicator over mpi_comm (MPI.COMM_WORLD by default); 1 rank without mpiexec. Or,
    with no MPI in the job (under torchrun), over a torch.distributed Store shared by `size`
    processes, this one `rank`: every rank on one host (shared memory). One store (or
    PrefixStore) per group of ranks: each rank counts its communicators in it."""
    return Communicator(mpi_comm, timeout=timeout, store=store, rank=rank, size=size)


def _wire(mpi_comm, store, rank, size):
    """What the bootstrap's messages travel on: the store, where one is given, else MPI."""
    if store is None:
        if rank is not None or size is not None:
            raise ValueError("dpcore.init: rank and size go with a store; over MPI they are "
                             "the communicator's")
        from mpi4py import MPI

        from .mpi_wire import MpiWire
        return MpiWire(mpi_comm if mpi_comm is not None else MPI.COMM_WORLD)
    if mpi_comm is not None:
        raise ValueError("dpcore.init: an MPI communicator or a store, not both")
    for name, value in (("rank", rank), ("size", size)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"dpcore.init: with a store, {name} must be an int, not "
                            f"{type(value).__name__}")
    if not 0 <= rank < size:
        raise ValueError(f"dpcore.init: rank {rank} is not in [0, {size})")
    return StoreWire(store, int(rank), int(size))
