"""The collectives (and sendrecv) as nccl-tests' hooks, for the one harness in harness.py.

Each test supplies (as nccl-tests' src/<coll>.cu does):
  sizes(count, n)        -> (send_count, recv_count, count): elements each rank sends and
                            receives for a `-b/-e` size of `count` elements, and nccl-tests'
                            "count" column (per rank for reduce_scatter, all_gather, gather,
                            scatter and alltoall);
  init(send, case)       -> fill this rank's input (exact integer values, see below);
  expected(case)         -> the output this rank must receive, computed locally, or None where
                            the rank receives nothing to check (reduce's and gather's non-roots);
  bus_factor(n)          -> busbw / algbw, from nccl-tests' doc/PERFORMANCE.md;
plus run (dpcore), run_mpi (mpi4py on the same host buffers, for --compare mpi) and run_nccl
(NCCL through CuPy on the same GPU buffers, for --device cuda; compare.py makes its communicator).
sizes, bus_factor, reduces and rooted come from the collective's row of dpcore.collectives;
sendrecv is not a row (point to point): each rank sends to the next and receives from the previous,
as nccl-tests' sendrecv_perf, with a bus factor of 1. in_place_only / out_of_place_only: the
verb cannot run the other placement, so both columns time this one.

Inputs are integers chosen so that every result is exact in the dtype (sums stay within the
dtype's exact-integer range, products are powers of two that cannot overflow), so `#wrong` counts
elements whose bits differ, with no tolerance. A value depends on the element's global index
(period _PERIOD, a prime, so a chunk moved to the wrong place shows) and on the rank.
"""
import math

import numpy as np

from .. import collectives
from ..sharding import shard_range

_PERIOD = 4099

# Largest magnitude up to which every integer is exact in the dtype (ints: their range).
_EXACT = {"float16": 2 ** 11, "bfloat16": 2 ** 8, "float32": 2 ** 24, "float64": 2 ** 53,
          "int8": 127, "uint8": 255, "int32": 2 ** 31 - 1, "int64": 2 ** 62}
# How many factors of 2 a product may hold without overflow.
_MAX_TWOS = {"float16": 15, "bfloat16": 127, "float32": 127, "float64": 1023,
             "int8": 6, "uint8": 7, "int32": 30, "int64": 62}
_VALUE_CAP = 2 ** 40  # keeps int64/float64 patterns and their sums easy to reason about


class Case:
    """One row of the table: what every hook needs to know."""

    def __init__(self, dtype, op, root, algo, n, rank, count, sizes):
        self.dtype, self.op, self.root, self.algo = dtype, op, root, algo
        self.n, self.rank, self.count = n, rank, count
        self.send_count, self.recv_count, self.count_column = sizes
        self.dtype_name = dtype_name(dtype)


def dtype_name(dtype):
    return np.dtype(dtype).name  # "bfloat16" for ml_dtypes' too


# -- exact input patterns -------------------------------------------------------------------

def _table(case, rank):
    """The values of `rank` over one period of global indices, as float64 or int64."""
    name, n = case.dtype_name, case.n
    j = np.arange(_PERIOD, dtype=np.uint64)
    if case.op == "prod":  # mostly 1, a 2 where few enough ranks put one
        every = max(3, math.ceil(n / _MAX_TWOS[name]))
        return np.where((j + np.uint64(rank)) % np.uint64(every) == 0, 2, 1).astype(np.int64)
    hi = min(_EXACT[name], _VALUE_CAP)
    if case.op in ("sum", "avg"):
        hi //= n  # the sum over n ranks stays exact
    lo = 0 if name == "uint8" or case.op in ("sum", "avg") else -hi
    span = np.uint64(max(hi - lo + 1, 1))
    mixed = (j * np.uint64(2654435761) + np.uint64(rank * 40503 + 12345)) % span
    return mixed.astype(np.int64) + lo


def _tile(table, dtype, start, stop):
    """table[i % _PERIOD] for global indices i in [start, stop), in dtype."""
    shifted = np.roll(table, -(start % _PERIOD)).astype(dtype)
    return np.resize(shifted, max(stop - start, 0))


def _reduced_table(case):
    tables = [_table(case, r) for r in range(case.n)]
    floating = case.dtype_name.startswith(("float", "bfloat"))
    tables = [t.astype(np.float64 if floating else np.int64) for t in tables]
    if case.op == "max":
        return np.maximum.reduce(tables)
    if case.op == "min":
        return np.minimum.reduce(tables)
    if case.op == "prod":
        return np.multiply.reduce(tables)
    total = np.add.reduce(tables)
    if case.op == "avg":  # as dpcore computes it: the exact sum divided in the arithmetic type
        arith = np.float64 if case.dtype_name == "float64" else np.float32
        return total.astype(arith) / arith(case.n)
    return total


def _fill_shard_of(case, rank, out, start):
    """out[:] = rank's input at global indices [start, start + out.size)."""
    out[...] = _tile(_table(case, rank), case.dtype, start, start + out.size)


# -- MPI datatypes and ops ------------------------------------------------------------------

_MPI_NAMES = {"float32": "FLOAT", "float64": "DOUBLE", "int8": "INT8_T", "uint8": "UINT8_T",
              "int32": "INT32_T", "int64": "INT64_T"}
_MPI_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN", "avg": "SUM"}


def mpi_supported(coll, case):
    """Whether MPI can run this case: it has no float16/bfloat16 reduction."""
    return not coll.reduces or case.dtype_name in _MPI_NAMES


def _mpi_buf(a, case):
    from mpi4py import MPI

    if case.dtype_name in _MPI_NAMES:
        return [a, getattr(MPI, _MPI_NAMES[case.dtype_name])]
    return [a.view(np.uint16), MPI.UINT16_T]  # moving 16-bit floats needs no arithmetic


def _mpi_op(case):
    from mpi4py import MPI

    return getattr(MPI, _MPI_OPS[case.op])  # avg is timed as MPI's SUM


# NCCL's names in cupy.cuda.nccl. The in-place layouts are the harness's: reduce_scatter's output
# and all_gather's input are the rank's shard of the larger buffer, at rank * count as NCCL wants.
NCCL_TYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
              "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
              "int64": "NCCL_INT64"}
NCCL_OPS = {"sum": "NCCL_SUM", "prod": "NCCL_PROD", "max": "NCCL_MAX", "min": "NCCL_MIN",
            "avg": "NCCL_AVG"}


def _counts(total, n):
    return [b - a for a, b in (shard_range(total, n, r) for r in range(n))]


# -- the collectives ------------------------------------------------------------------------

class _Hooks:
    """What a collective's row in the table says (dpcore.collectives): whether it reduces, takes
    a root, how its output's count follows from its input's, its bus factor."""
    in_place_only = out_of_place_only = False

    def __init_subclass__(cls):
        row = collectives.get(cls.name)
        cls.reduces, cls.rooted, cls.output = row.reduces, row.rooted, row.output

    @classmethod
    def sizes(cls, count, n):
        # nccl-tests: reduce_scatter's recvcount and all_gather's sendcount are count / n per
        # rank, and the other side n of those
        per_rank = count // n
        if cls.output == "own_shard":
            return per_rank * n, per_rank, per_rank
        if cls.output == "sum_of_shards":
            return per_rank, per_rank * n, per_rank
        return count, count, count

    @classmethod
    def bus_factor(cls, n):
        return collectives.bus_factor(cls.name, n)


class AllReduce(_Hooks):
    name = "all_reduce"

    @staticmethod
    def init(send, case):
        _fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        return _tile(_reduced_table(case), case.dtype, 0, case.recv_count)

    @staticmethod
    def run(comm, send, recv, case):
        comm.all_reduce(send, op=case.op, out=recv, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        from mpi4py import MPI

        source = MPI.IN_PLACE if in_place else _mpi_buf(send, case)
        mpi_comm.Allreduce(source, _mpi_buf(recv, case), _mpi_op(case))

    @staticmethod
    def run_nccl(nccl, send, recv, case):
        nccl.comm.allReduce(send.data.ptr, recv.data.ptr, case.recv_count, nccl.dtype(case),
                            nccl.op(case), nccl.stream)


class ReduceScatter(_Hooks):
    name = "reduce_scatter"

    @staticmethod
    def init(send, case):
        _fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        start, stop = shard_range(case.send_count, case.n, case.rank)
        return _tile(_reduced_table(case), case.dtype, start, stop)

    @staticmethod
    def run(comm, send, recv, case):
        comm.reduce_scatter(send, op=case.op, out=recv, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        from mpi4py import MPI

        # In place, MPI leaves the rank's result at the front of the buffer, not at its shard;
        # the data moved and reduced are the same, which is what is timed here.
        source = MPI.IN_PLACE if in_place else _mpi_buf(send, case)
        target = _mpi_buf(send if in_place else recv, case)
        counts = _counts(case.send_count, case.n)
        if len(set(counts)) == 1:
            mpi_comm.Reduce_scatter_block(source, target, _mpi_op(case))
        else:
            mpi_comm.Reduce_scatter(source, target, counts, _mpi_op(case))

    @staticmethod
    def run_nccl(nccl, send, recv, case):  # NCCL's count: each rank's share, as recv_count
        nccl.comm.reduceScatter(send.data.ptr, recv.data.ptr, case.recv_count, nccl.dtype(case),
                                nccl.op(case), nccl.stream)


class AllGather(_Hooks):
    name = "all_gather"

    @staticmethod
    def init(send, case):
        start, _ = shard_range(case.recv_count, case.n, case.rank)
        _fill_shard_of(case, case.rank, send, start)

    @staticmethod
    def expected(case):
        out = np.empty(case.recv_count, case.dtype)
        for r in range(case.n):
            start, stop = shard_range(case.recv_count, case.n, r)
            _fill_shard_of(case, r, out[start:stop], start)
        return out

    @staticmethod
    def run(comm, send, recv, case):
        comm.all_gather(send, out=recv, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        from mpi4py import MPI

        source = MPI.IN_PLACE if in_place else _mpi_buf(send, case)
        counts = _counts(case.recv_count, case.n)
        if len(set(counts)) == 1:
            mpi_comm.Allgather(source, _mpi_buf(recv, case))
        else:
            target = _mpi_buf(recv, case)
            mpi_comm.Allgatherv(source, [target[0], counts, target[1]])

    @staticmethod
    def run_nccl(nccl, send, recv, case):  # NCCL's count: each rank's share, as send_count
        nccl.comm.allGather(send.data.ptr, recv.data.ptr, case.send_count, nccl.dtype(case),
                            nccl.stream)


class Broadcast(_Hooks):
    # dpcore's broadcast is in place, so both columns time the in-place call (nccl-tests
    # prints both as well).
    name, in_place_only = "broadcast", True

    @staticmethod
    def init(send, case):  # every rank starts from its own values; only the root's survive
        _fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        return _tile(_table(case, case.root), case.dtype, 0, case.recv_count)

    @staticmethod
    def run(comm, send, recv, case):
        comm.broadcast(recv, root=case.root, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        mpi_comm.Bcast(_mpi_buf(recv, case), root=case.root)

    @staticmethod
    def run_nccl(nccl, send, recv, case):
        nccl.comm.broadcast(recv.data.ptr, recv.data.ptr, case.recv_count, nccl.dtype(case),
                            case.root, nccl.stream)


def _root_only(expected):
    """expected for a rooted verb whose output only the root has."""
    return staticmethod(lambda case: expected(case) if case.rank == case.root else None)


def _send_recv_mpi(case, n):
    """MPI's (v) counts and displacements of a gather or scatter of case's shards."""
    counts = _counts(case.count_column * n, n)
    return counts, [sum(counts[:r]) for r in range(n)]


class Reduce(_Hooks):
    name = "reduce"
    init = staticmethod(AllReduce.init)
    expected = _root_only(AllReduce.expected)

    @staticmethod
    def run(comm, send, recv, case):
        out = recv if case.rank == case.root else None
        comm.reduce(send, root=case.root, op=case.op, out=out, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        from mpi4py import MPI

        root = case.rank == case.root
        source = MPI.IN_PLACE if in_place and root else _mpi_buf(send, case)
        mpi_comm.Reduce(source, _mpi_buf(recv, case) if root else None, _mpi_op(case),
                        root=case.root)

    @staticmethod
    def run_nccl(nccl, send, recv, case):
        nccl.comm.reduce(send.data.ptr, recv.data.ptr, case.recv_count, nccl.dtype(case),
                         nccl.op(case), case.root, nccl.stream)


class Gather(_Hooks):
    name = "gather"
    init = staticmethod(AllGather.init)
    expected = _root_only(AllGather.expected)

    @staticmethod
    def run(comm, send, recv, case):
        out = recv if case.rank == case.root else None
        comm.gather(send, root=case.root, out=out, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        from mpi4py import MPI

        root = case.rank == case.root
        source = MPI.IN_PLACE if in_place and root else _mpi_buf(send, case)
        target = None
        if root:
            buf, kind = _mpi_buf(recv, case)
            target = [buf, _send_recv_mpi(case, case.n), kind]
        mpi_comm.Gatherv(source, target, root=case.root)

    @staticmethod
    def run_nccl(nccl, send, recv, case):  # NCCL has no gather: sends and recvs, as nccl-tests
        _nccl_group(nccl, [("send", send, case.root)] + (
            [("recv", recv[r * case.send_count:(r + 1) * case.send_count], r)
             for r in range(case.n)] if case.rank == case.root else []), case)


class Scatter(_Hooks):
    name = "scatter"

    @staticmethod
    def init(send, case):  # every rank fills its input; only the root's is read
        _fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        start, stop = shard_range(case.send_count, case.n, case.rank)
        return _tile(_table(case, case.root), case.dtype, start, stop)

    @staticmethod
    def run(comm, send, recv, case):
        x = send if case.rank == case.root else None
        comm.scatter(x, recv, root=case.root, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        from mpi4py import MPI

        root = case.rank == case.root
        source = None
        if root:
            buf, kind = _mpi_buf(send, case)
            source = [buf, _send_recv_mpi(case, case.n), kind]
        target = MPI.IN_PLACE if in_place and root else _mpi_buf(recv, case)
        mpi_comm.Scatterv(source, target, root=case.root)

    @staticmethod
    def run_nccl(nccl, send, recv, case):  # NCCL has no scatter: sends and recvs, as nccl-tests
        _nccl_group(nccl, [("recv", recv, case.root)] + (
            [("send", send[r * case.recv_count:(r + 1) * case.recv_count], r)
             for r in range(case.n)] if case.rank == case.root else []), case)


class AllToAll(_Hooks):
    # dpcore's all_to_all writes out apart from x, so both columns time that
    name, out_of_place_only = "all_to_all", True

    @classmethod
    def sizes(cls, count, n):  # nccl-tests' alltoall: n chunks of count // n, to each rank one
        per_rank = count // n
        return per_rank * n, per_rank * n, per_rank

    @staticmethod
    def init(send, case):  # global index rank * size + i, as if every input were one array
        _fill_shard_of(case, case.rank, send, case.rank * case.send_count)

    @staticmethod
    def expected(case):
        out = np.empty(case.recv_count, case.dtype)
        k = case.count_column
        for p in range(case.n):  # chunk `rank` of rank p's input
            start = p * case.send_count + case.rank * k
            _fill_shard_of(case, p, out[p * k:(p + 1) * k], start)
        return out

    @staticmethod
    def run(comm, send, recv, case):
        comm.all_to_all(send, out=recv, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        mpi_comm.Alltoall(_mpi_buf(send, case), _mpi_buf(recv, case))

    @staticmethod
    def run_nccl(nccl, send, recv, case):  # as nccl-tests' alltoall: a send and a recv a peer
        k = case.count_column
        _nccl_group(nccl, [op for r in range(case.n) for op in (
            ("send", send[r * k:(r + 1) * k], r), ("recv", recv[r * k:(r + 1) * k], r))], case)


def _nccl_group(nccl, ops, case):
    """NCCL sends and recvs ((kind, array, peer), ...) in one group, as nccl-tests' hooks that
    NCCL has no collective for."""
    nccl.nccl.groupStart()
    try:
        for kind, a, peer in ops:
            getattr(nccl.comm, kind)(a.data.ptr, a.size, nccl.dtype(case), peer, nccl.stream)
    finally:
        nccl.nccl.groupEnd()


class SendRecv:
    """nccl-tests' sendrecv_perf: rank r sends its buffer to r+1 and receives r-1's, all at once
    (comm.batch of a send and a recv). Point to point, not a row of the table: its numbers are
    here. Like nccl-tests, it does not run in place (both columns time separate buffers)."""
    name, reduces, rooted = "sendrecv", False, False
    in_place_only, out_of_place_only = False, True

    @staticmethod
    def sizes(count, n):
        return count, count, count

    @staticmethod
    def bus_factor(n):
        return 1.0

    @staticmethod
    def init(send, case):
        _fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        return _tile(_table(case, (case.rank - 1) % case.n), case.dtype, 0, case.recv_count)

    @staticmethod
    def run(comm, send, recv, case):
        from ..comm.p2p import P2POp

        n, r = case.n, case.rank
        for work in comm.batch([P2POp("send", send, (r + 1) % n),
                                P2POp("recv", recv, (r - 1) % n)]):
            work.wait()

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        n, r = case.n, case.rank
        mpi_comm.Sendrecv(_mpi_buf(send, case), (r + 1) % n, 0, _mpi_buf(recv, case),
                          (r - 1) % n, 0)

    @staticmethod
    def run_nccl(nccl, send, recv, case):
        n, r = case.n, case.rank
        _nccl_group(nccl, [("send", send, (r + 1) % n), ("recv", recv, (r - 1) % n)], case)


# The table's collectives, in its order, by dpcore's names; TESTS adds sendrecv and nccl-tests'
# name alltoall (`python -m dpcore.bench alltoall`, alltoall_perf).
COLLECTIVES = {c.name: c for c in (AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Gather,
                                   Scatter, AllToAll)}
TESTS = {**COLLECTIVES, "alltoall": AllToAll, "sendrecv": SendRecv}
