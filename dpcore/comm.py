"""The Communicator: MPI bootstrap, transport choice, argument checks, results as arrays.

Every check happens before anything is sent, so bad local input raises TypeError/ValueError on
the rank that made it and leaves the communicator usable; the peers never see the call.
A backend runs the checked call: dpcore._C.ShmComm inside a node, or a transport from
dpcore.transports.mpi; all take the same raw calls (run, submit, exchange_counts, drain).
"""
import os

import numpy as np

from . import _C, trace
from .arrays import as_numpy, check_contiguous, check_out
from .cost import auto as _auto
from .dtypes import (ALL_GATHER, ALL_REDUCE, AVG, BARRIER, BROADCAST, DTYPES, FLOATING, OPS,
                     REDUCE_SCATTER, dtype_code)
from .sharding import shard_range
from .shared_memory import fresh_name, map_everywhere
from .work import Work

ALGORITHMS = {"one_shot": 0, "ring": 1}
# Where the ranks may read each other's memory (comm.direct), every rank can copy straight from
# the peers' buffers: one copy where the ring's FIFO takes two.
DIRECT, _DIRECT_CODE = "direct", 3
# Past one_shot's sizes, auto runs whichever of the ring and direct has lately been faster for
# that collective, size class and kind of buffer, as rank 0 times them (csrc/cpu/tuner.h: on
# the development VM the winner flips with where the host puts the cores, during a run).
# DPCORE_TUNE=0 has rank 0 pick by fixed thresholds instead (Tuner::fixedPick: direct from
# _C.FIXED_DIRECT_MIN bytes, and all_gather on comm.alloc buffers at any size).
_TUNED_CODE = 4
_TUNE = os.environ.get("DPCORE_TUNE", "1") != "0"
_DIRECT_COLLECTIVES = ("all_gather", "broadcast", "all_reduce", "reduce_scatter")
ALGORITHM_NAMES = {**{code: name for name, code in ALGORITHMS.items()}, _DIRECT_CODE: DIRECT,
                   _TUNED_CODE: "auto"}

# Shared-memory tuning, identical on every rank (local rank 0 reads the environment).
_FIFO_SLOTS = max(2, int(os.environ.get("DPCORE_FIFO_SLOTS", 8)))  # a step holds one slot of
# its incoming FIFO while it waits for one in the outgoing: the ring needs at least 2
_SLOT_BYTES = int(os.environ.get("DPCORE_SLOT_BYTES", 64 << 10))
_ONE_SHOT_BYTES = int(os.environ.get("DPCORE_ONE_SHOT_BYTES", 256 << 10))
# Without a fitted cost model, "auto" switches from one-shot to ring above this many bytes per
# rank: where the two cross on the development VM (benchmarks/auto_vs_fixed.py, 2026-12-01):
# 2 ranks on its 2 cores at 4 KiB (1.5 us each; one_shot 1.4x slower at 16 KiB); 3 or 4
# ranks sharing them near 128 KiB, since every ring step then waits for a context switch (at
# 16 KiB the ring took 39-47 us, one_shot 16-21).
_ONE_SHOT_MAX = int(os.environ.get("DPCORE_ONE_SHOT_MAX", 4 << 10))
_ONE_SHOT_MAX_OVERSUBSCRIBED = 128 << 10


# What a barrier passes for its (unused) buffers.
_EMPTY = np.empty(0, np.uint8)
_EMPTY.flags.writeable = False
_EMPTY_CODE = DTYPES[_EMPTY.dtype]


def default_one_shot_max(n, transport=None):
    """auto's one_shot limit without a fitted model: larger where n ranks of this node
    outnumber the cores it may run on."""
    crowded = transport in (None, "shm") and n > len(os.sched_getaffinity(0))
    return _ONE_SHOT_MAX_OVERSUBSCRIBED if crowded else _ONE_SHOT_MAX


class Communicator:
    """A group of ranks and the collectives among them (see ../shared/API.md)."""

    algorithms = tuple(ALGORITHMS)

    def __init__(self, mpi_comm=None, timeout=None):
        from mpi4py import MPI

        if timeout is None:
            timeout = float(os.environ.get("DPCORE_TIMEOUT", 300))
        self.timeout = float(timeout)
        self._mpi = (mpi_comm if mpi_comm is not None else MPI.COMM_WORLD).Dup()
        self.rank, self.size = self._mpi.Get_rank(), self._mpi.Get_size()
        node_size = int(os.environ.get("DPCORE_NODE_SIZE", 0))
        if node_size > 0:  # virtual nodes: exercises the between-node path on one machine
            self._node = self._mpi.Split(self.rank // node_size, self.rank)
        else:
            self._node = self._mpi.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = self._node.Get_rank(), self._node.Get_size()
        self.transport = self._choose_transport()
        _auto.agree(self._mpi)  # every rank chooses by rank 0's fitted cost model
        self._auto_bands = _auto.bands(self.size, _ONE_SHOT_BYTES, self.transport)
        self._pending = []
        self.direct = False  # set by _connect when every rank may read every peer's memory
        self._backend = self._connect()

    def _choose_transport(self):
        wanted = os.environ.get("DPCORE_TRANSPORT", "auto")
        if wanted not in ("auto", "shm", "mpi"):
            raise ValueError(f"DPCORE_TRANSPORT={wanted!r}: expected auto, shm or mpi")
        one_node = self._mpi.allreduce(self.local_size == self.size, op=_mpi_land())
        if wanted == "shm" and not one_node:
            raise ValueError("DPCORE_TRANSPORT=shm, but the ranks do not all share a node")
        if wanted == "mpi":
            return "mpi"
        return "shm" if one_node else "shm+mpi"

    def _connect(self):
        if self.transport == "shm":
            shm = _connect_shm(self._node, self.timeout)
            self.direct = self._node.allreduce(shm.can_read_peers(), op=_mpi_land())
            if trace.enabled():
                trace.watch(self.rank, shm)
            return shm
        from .transports.mpi import HierarchicalTransport, MpiTransport

        if self.transport == "mpi":
            return MpiTransport(self._mpi, self.timeout)
        node_shm = _connect_shm(self._node, self.timeout)
        return HierarchicalTransport(self._mpi, self._node, node_shm, self.timeout)

    def alloc(self, shape, dtype=np.float32):
        """A zero-filled NumPy array in memory that every rank of this node maps, like NCCL's
        ncclMemAlloc or PyTorch's symmetric memory. Collective: every rank of the communicator
        calls it, in the same order, for the same shape and dtype. Collectives take it like any
        array; algo "direct" (which auto may pick) then reads the peers' data out of it with one
        plain copy instead of a kernel copy. Freed with the last reference to the array (or a
        view of it). Across nodes, or with one rank, it is ordinary memory."""
        from .shared_memory import alloc

        return alloc(self, shape, dtype)

    # -- collectives ------------------------------------------------------------------------

    def all_reduce(self, x, op="sum", out=None, algo="auto", async_op=False):
        a, wrap = (x, None) if type(x) is np.ndarray else as_numpy(x)
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
        return self._launch(ALL_REDUCE, dtype, opc, 0, self._algo(algo, a.nbytes), a, out_a,
                            a.size, a.size, result, async_op)

    def reduce_scatter(self, x, op="sum", out=None, async_op=False, algo="auto"):
        a, wrap = (x, None) if type(x) is np.ndarray else as_numpy(x)
        dtype, opc = self._check_reduction(a, op)
        start, stop = shard_range(a.size, self.size, self.rank)
        if out is None:
            out_a = np.empty(stop - start, a.dtype)
            result = wrap(out_a) if wrap else out_a
        else:
            out_a, result = check_out(out, a.dtype, stop - start, None), out
        return self._launch(REDUCE_SCATTER, dtype, opc, 0,
                            self._algo(algo, a.nbytes, "reduce_scatter"), a, out_a,
                            a.size, a.size, result, async_op)

    def all_gather(self, s, out=None, async_op=False, algo="auto"):
        a, wrap = (s, None) if type(s) is np.ndarray else as_numpy(s, "shard")
        dtype = dtype_code(a.dtype)
        check_contiguous(a, "shard")
        a = a.reshape(-1)
        if algo != "auto" and algo not in ALGORITHMS:
            self._algo(algo, 0, "all_gather")  # raises before the shard sizes travel
        if out is None:
            self._reap()
            total = sum(self._checked_backend().exchange_counts(dtype, a.size))
            out_a = np.empty(total, a.dtype)
            result = wrap(out_a) if wrap else out_a
        else:
            out_a = check_out(out, a.dtype, None, None).reshape(-1)
            result = out
        return self._launch(ALL_GATHER, dtype, 0, 0, self._algo(algo, out_a.nbytes, "all_gather"),
                            a, out_a, a.size, out_a.size, result, async_op)

    def broadcast(self, x, root=0, algo="auto", async_op=False):
        a = x if type(x) is np.ndarray else as_numpy(x)[0]
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
        if not isinstance(root, (int, np.integer)) or not 0 <= root < self.size:
            raise ValueError(f"dpcore: broadcast root {root!r} is not a rank in [0, {self.size})")
        if not a.flags.writeable:
            raise ValueError("dpcore: broadcast writes x in place, but x is read-only")
        return dtype, int(root)

    def barrier(self):
        self._launch(BARRIER, _EMPTY_CODE, 0, 0, 0, _EMPTY, _EMPTY, 0, 0, None, False)

    # -- plumbing ---------------------------------------------------------------------------

    @staticmethod
    def _check_reduction(a, op):
        dtype = DTYPES.get(a.dtype)
        if dtype is None:
            dtype_code(a.dtype)  # raises the full message
        if not a.flags.c_contiguous:
            check_contiguous(a, "x")
        opc = OPS.get(op)
        if opc is None:
            raise ValueError(f"dpcore: unknown op {op!r}; expected one of {', '.join(OPS)}")
        if opc == AVG and dtype not in FLOATING:
            raise TypeError(f"dpcore: op 'avg' needs a floating dtype, not {a.dtype}")
        return dtype, opc

    def _algo(self, algo, nbytes, coll="all_reduce"):
        if algo == "auto":  # one_shot inside the band dpcore.cost.auto derived from the fit
            lo, hi = self._auto_bands.get(coll) or _auto.fill(
                coll, nbytes, self.size, _ONE_SHOT_BYTES, self.rank, self.transport)
            if lo <= nbytes <= hi:
                return 0
            return _TUNED_CODE if self.direct else 1
        if algo == DIRECT:
            if coll not in _DIRECT_COLLECTIVES:
                raise ValueError(f"dpcore: algo 'direct' does not run {coll}")
            if not self.direct:
                raise ValueError("dpcore: algo 'direct' needs ranks on one node that may read each "
                                 "other's memory (process_vm_readv); not available here")
            return _DIRECT_CODE
        code = ALGORITHMS.get(algo)
        if code is None:
            raise ValueError(f"dpcore: unknown algo {algo!r}; expected auto or one of "
                             f"{', '.join(ALGORITHMS)}, or direct (all_gather, broadcast)")
        if code == 0 and nbytes > _ONE_SHOT_BYTES:
            raise ValueError(f"dpcore: algo 'one_shot' takes at most {_ONE_SHOT_BYTES} "
                             f"bytes per rank, got {nbytes}")
        return code

    def algorithm_calls(self):
        """{algorithm: how many collectives it ran} on this communicator so far, with auto's
        picks resolved ("ring", "direct", ...). Shared memory only; other transports give {}."""
        calls = getattr(self._checked_backend(), "algo_calls", None)
        if calls is None:
            return {}
        return {ALGORITHM_NAMES[code]: k for code, k in enumerate(calls())
                if k and code in ALGORITHM_NAMES}

    def _checked_backend(self):
        if self._backend is None:
            raise ValueError("dpcore: the communicator is closed")
        return self._backend

    def _launch(self, coll, dtype, op, root, algo, a, out_a, count, total, result, async_op):
        backend = self._backend
        if backend is None:
            self._checked_backend()  # raises
        if not async_op:
            backend.run(coll, dtype, op, root, algo, a, out_a, count, total)
            return result
        self._reap()
        work = Work(backend.submit(coll, dtype, op, root, algo, a, out_a, count, total),
                    result, a, out_a)
        self._pending.append(work)  # keeps the arrays alive even if the caller drops the Work
        return work

    def _reap(self):
        if self._pending:
            self._pending = [w for w in self._pending if not w.done()]

    def close(self):
        """Finish queued collectives, unmap the segment, free the MPI communicators."""
        if self._backend is None:
            return
        self._backend.drain()
        if trace.enabled() and self.transport == "shm":
            trace.collect(self._backend)
        close = getattr(self._backend, "close", None)
        if close is not None:  # a transport's thread and communicators
            close()
        self._pending = []
        self._backend = None
        for c in (self._node, self._mpi):
            c.Free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"<dpcore.Communicator rank {self.rank}/{self.size} local "
                f"{self.local_rank}/{self.local_size} transport={self.transport}>")


def _connect_shm(node, timeout):
    """A shared-memory communicator over the ranks of `node` (an MPI communicator whose ranks
    share memory), in a segment of its own (shared_memory.map_everywhere)."""
    rank, size = node.Get_rank(), node.Get_size()
    config = None
    if rank == 0:
        config = (fresh_name()[0], _FIFO_SLOTS, _SLOT_BYTES, _ONE_SHOT_BYTES, _TUNE)
    name, slots, slot_bytes, one_shot_bytes, tune = node.bcast(config, root=0)
    return map_everywhere(node, name, lambda create: _C.ShmComm(
        name, create, rank, size, slots, slot_bytes, one_shot_bytes, tune, timeout))


def _mpi_land():
    from mpi4py import MPI

    return MPI.LAND


def init(mpi_comm=None, timeout=None):
    """A communicator over mpi_comm (MPI.COMM_WORLD by default); 1 rank without mpiexec."""
    return Communicator(mpi_comm, timeout=timeout)
