"""HierarchicalTransport: ranks on several nodes; shared memory inside a node, MPI between.

all_reduce, N nodes of L ranks each, S bytes (local rank l, shard l = shard_range(count, L, l)):

    1. node_shm reduce-scatter      local rank l holds its node's reduction of shard l
    2. MPI all-reduce of shard l    among the N ranks with local rank l (one per node): the
                                    ring (or one shot) of p2p.py over the "cross" communicator
    3. node_shm all-gather          every rank gets every shard

Between nodes each rank sends 2(N-1)/N * S/L bytes, a node 2(N-1)/N * S: about what the one
node-crossing link of a flat ring carries (2(NL-1)/NL * S), but in 2(N-1) steps instead of
2(NL-1), with the L ranks of a node sending at once, and the rest on shared memory. Every chunk
is finished by one rank and then only copied, so every rank gets identical bits. avg sums inside
the node and divides once, where the cross all-reduce finishes a chunk, by N*L.

Nodes that differ in size fall back to the flat MpiTransport algorithms over all ranks, as do
reduce_scatter, all_gather, broadcast and barrier: correct, but not yet node-aware (they move
every byte over MPI, also between ranks that share a node).
"""
from ..dtypes import ALL_GATHER, AVG, OPS, REDUCE_SCATTER
from ..sharding import shard_range
from .mpi import ONE_SHOT, MpiTransport
from .p2p import CommError, Link, one_shot_all_reduce, ring_all_reduce

SUM = OPS["sum"]


class HierarchicalTransport(MpiTransport):
    """MpiTransport whose all_reduce goes through node_shm (a dpcore._C.ShmComm over
    node_comm's ranks) when every node has the same number of ranks."""

    def __init__(self, mpi_comm, node_comm, node_shm, timeout):
        super().__init__(mpi_comm, timeout)
        self.local_rank, self.local_size = node_comm.Get_rank(), node_comm.Get_size()
        self._node_shm = node_shm
        sizes = mpi_comm.allgather(self.local_size)
        self.uniform = all(s == sizes[0] for s in sizes)
        self._cross = None
        # with one rank per node (or one node) the flat algorithms are the hierarchical ones
        if self.uniform and 1 < self.local_size < self.size:
            cross = mpi_comm.Split(self.local_rank, self.rank)
            self._cross = Link(cross, cross.allgather(self.rank))

    def close(self):
        super().close()
        if self._cross is not None:
            self._cross.comm.Free()
            self._cross = None

    def _start(self, call):
        super()._start(call)
        if self._cross is not None:
            self._cross.call = call

    def _all_reduce(self, call, dtype, op, algo, a, out):
        if self._cross is None:
            return super()._all_reduce(call, dtype, op, algo, a, out)
        lo, hi = shard_range(a.size, self.local_size, self.local_rank)
        shard = out[lo:hi]
        # inside the node, avg is a sum: the division happens once, below
        self._node(call, REDUCE_SCATTER, dtype, SUM if op == AVG else op, algo, a, shard,
                   a.size, a.size)
        f = one_shot_all_reduce if algo == ONE_SHOT else ring_all_reduce
        f(self._cross, dtype, op, shard, shard, self.size if op == AVG else 0)
        self._node(call, ALL_GATHER, dtype, 0, algo, shard, out, shard.size, out.size)

    def _node(self, call, coll, dtype, op, algo, in_array, out_array, count, total):
        try:
            self._node_shm.run(coll, dtype, op, 0, algo, in_array, out_array, count, total)
        except CommError as e:  # name the collective the user called, not the node's step
            raise call.error(f"inside the node: {e}") from e
