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

Inputs are patterns.py's exact integers, so `#wrong` counts elements whose bits differ.
"""
import numpy as np

from .. import collectives
from ..sharding import shard_range
from .compare import mpi_buf, mpi_op, nccl_group
from .patterns import fill_shard_of, rank_values, reduced_values, tile


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
        fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        return tile(reduced_values(case), case.dtype, 0, case.recv_count)

    @staticmethod
    def run(comm, send, recv, case):
        comm.all_reduce(send, op=case.op, out=recv, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        from mpi4py import MPI

        source = MPI.IN_PLACE if in_place else mpi_buf(send, case)
        mpi_comm.Allreduce(source, mpi_buf(recv, case), mpi_op(case))

    @staticmethod
    def run_nccl(nccl, send, recv, case):
        nccl.comm.allReduce(send.data.ptr, recv.data.ptr, case.recv_count, nccl.dtype(case),
                            nccl.op(case), nccl.stream)


class ReduceScatter(_Hooks):
    name = "reduce_scatter"

    @staticmethod
    def init(send, case):
        fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        start, stop = shard_range(case.send_count, case.n, case.rank)
        return tile(reduced_values(case), case.dtype, start, stop)

    @staticmethod
    def run(comm, send, recv, case):
        comm.reduce_scatter(send, op=case.op, out=recv, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        from mpi4py import MPI

        # In place, MPI leaves the rank's result at the front of the buffer, not at its shard;
        # the data moved and reduced are the same, which is what is timed here.
        source = MPI.IN_PLACE if in_place else mpi_buf(send, case)
        target = mpi_buf(send if in_place else recv, case)
        counts = _counts(case.send_count, case.n)
        if len(set(counts)) == 1:
            mpi_comm.Reduce_scatter_block(source, target, mpi_op(case))
        else:
            mpi_comm.Reduce_scatter(source, target, counts, mpi_op(case))

    @staticmethod
    def run_nccl(nccl, send, recv, case):  # NCCL's count: each rank's share, as recv_count
        nccl.comm.reduceScatter(send.data.ptr, recv.data.ptr, case.recv_count, nccl.dtype(case),
                                nccl.op(case), nccl.stream)


class AllGather(_Hooks):
    name = "all_gather"

    @staticmethod
    def init(send, case):
        start, _ = shard_range(case.recv_count, case.n, case.rank)
        fill_shard_of(case, case.rank, send, start)

    @staticmethod
    def expected(case):
        out = np.empty(case.recv_count, case.dtype)
        for r in range(case.n):
            start, stop = shard_range(case.recv_count, case.n, r)
            fill_shard_of(case, r, out[start:stop], start)
        return out

    @staticmethod
    def run(comm, send, recv, case):
        comm.all_gather(send, out=recv, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        from mpi4py import MPI

        source = MPI.IN_PLACE if in_place else mpi_buf(send, case)
        counts = _counts(case.recv_count, case.n)
        if len(set(counts)) == 1:
            mpi_comm.Allgather(source, mpi_buf(recv, case))
        else:
            target = mpi_buf(recv, case)
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
        fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        return tile(rank_values(case, case.root), case.dtype, 0, case.recv_count)

    @staticmethod
    def run(comm, send, recv, case):
        comm.broadcast(recv, root=case.root, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        mpi_comm.Bcast(mpi_buf(recv, case), root=case.root)

    @staticmethod
    def run_nccl(nccl, send, recv, case):
        nccl.comm.broadcast(recv.data.ptr, recv.data.ptr, case.recv_count, nccl.dtype(case),
                            case.root, nccl.stream)


def _root_only(expected):
    """expected for a rooted verb whose output only the root has."""
    return staticmethod(lambda case: expected(case) if case.rank == case.root else None)


def _root_shards(a, case):
    """The root's whole buffer as MPI's Gatherv and Scatterv take it, [buffer, (counts,
    displacements), type]; None on the other ranks."""
    if case.rank != case.root:
        return None
    buf, kind = mpi_buf(a, case)
    counts = _counts(case.count_column * case.n, case.n)
    return [buf, (counts, [sum(counts[:r]) for r in range(case.n)]), kind]


def _own(a, case, in_place):
    """This rank's side of a rooted MPI call: MPI.IN_PLACE at the root of an in-place call."""
    from mpi4py import MPI

    return MPI.IN_PLACE if in_place and case.rank == case.root else mpi_buf(a, case)


def _root_group(nccl, own, whole, case, gathering):
    """NCCL's gather or scatter as nccl-tests runs it: every rank sends (gathering) or receives
    its shard `own`, and the root receives or sends every rank's shard of `whole`."""
    k = case.count_column
    kind, theirs = ("send", "recv") if gathering else ("recv", "send")
    ops = [(kind, own, case.root)]
    if case.rank == case.root:
        ops += [(theirs, whole[r * k:(r + 1) * k], r) for r in range(case.n)]
    nccl_group(nccl, ops, case)


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
        target = mpi_buf(recv, case) if case.rank == case.root else None
        mpi_comm.Reduce(_own(send, case, in_place), target, mpi_op(case), root=case.root)

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
        mpi_comm.Gatherv(_own(send, case, in_place), _root_shards(recv, case), root=case.root)

    @staticmethod
    def run_nccl(nccl, send, recv, case):  # NCCL has no gather
        _root_group(nccl, send, recv, case, gathering=True)


class Scatter(_Hooks):
    # dpcore's scatter refuses an out inside x (MPI's in-place root): both columns out of place
    name, out_of_place_only = "scatter", True

    @staticmethod
    def init(send, case):  # every rank fills its input; only the root's is read
        fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        start, stop = shard_range(case.send_count, case.n, case.rank)
        return tile(rank_values(case, case.root), case.dtype, start, stop)

    @staticmethod
    def run(comm, send, recv, case):
        x = send if case.rank == case.root else None
        comm.scatter(x, recv, root=case.root, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        mpi_comm.Scatterv(_root_shards(send, case), _own(recv, case, in_place), root=case.root)

    @staticmethod
    def run_nccl(nccl, send, recv, case):  # NCCL has no scatter
        _root_group(nccl, recv, send, case, gathering=False)


class AllToAll(_Hooks):
    # dpcore's all_to_all writes out apart from x, so both columns time that
    name, out_of_place_only = "all_to_all", True

    @classmethod
    def sizes(cls, count, n):  # nccl-tests' alltoall: n chunks of count // n, to each rank one
        per_rank = count // n
        return per_rank * n, per_rank * n, per_rank

    @staticmethod
    def init(send, case):  # global index rank * size + i, as if every input were one array
        fill_shard_of(case, case.rank, send, case.rank * case.send_count)

    @staticmethod
    def expected(case):
        out = np.empty(case.recv_count, case.dtype)
        k = case.count_column
        for p in range(case.n):  # chunk `rank` of rank p's input
            start = p * case.send_count + case.rank * k
            fill_shard_of(case, p, out[p * k:(p + 1) * k], start)
        return out

    @staticmethod
    def run(comm, send, recv, case):
        comm.all_to_all(send, out=recv, algo=case.algo)

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        mpi_comm.Alltoall(mpi_buf(send, case), mpi_buf(recv, case))

    @staticmethod
    def run_nccl(nccl, send, recv, case):  # as nccl-tests' alltoall: a send and a recv a peer
        k = case.count_column
        nccl_group(nccl, [op for r in range(case.n) for op in (
            ("send", send[r * k:(r + 1) * k], r), ("recv", recv[r * k:(r + 1) * k], r))], case)


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
        fill_shard_of(case, case.rank, send, 0)

    @staticmethod
    def expected(case):
        return tile(rank_values(case, (case.rank - 1) % case.n), case.dtype, 0, case.recv_count)

    @staticmethod
    def run(comm, send, recv, case):
        from .. import P2POp

        n, r = case.n, case.rank
        for work in comm.batch([P2POp("send", send, (r + 1) % n),
                                P2POp("recv", recv, (r - 1) % n)]):
            work.wait()

    @staticmethod
    def run_mpi(mpi_comm, send, recv, case, in_place):
        n, r = case.n, case.rank
        mpi_comm.Sendrecv(mpi_buf(send, case), (r + 1) % n, 0, mpi_buf(recv, case),
                          (r - 1) % n, 0)

    @staticmethod
    def run_nccl(nccl, send, recv, case):
        n, r = case.n, case.rank
        nccl_group(nccl, [("send", send, (r + 1) % n), ("recv", recv, (r - 1) % n)], case)


# The table's collectives, in its order, by dpcore's names; TESTS adds sendrecv and nccl-tests'
# name alltoall (`python -m dpcore.bench alltoall`, alltoall_perf).
COLLECTIVES = {c.name: c for c in (AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Gather,
                                   Scatter, AllToAll)}
TESTS = {**COLLECTIVES, "alltoall": AllToAll, "sendrecv": SendRecv}
