"""Gradient sync: where the gradients live and how one bucket of them is averaged across ranks.

  FullGrads     stages 0, 1   one flat gradient buffer for the whole model (flat.py); a bucket is
                              all-reduced in place (stage 0), or reduce-scattered in place
                              (stage 1), after which only this rank's chunk of it is the average
  ShardedGrads  stages 2, 3   only this rank's gradient shard; a bucket's gradients are copied
                              into a transient buffer and reduce-scattered from there

The cut is here because this is all that backward sees of a ZeRO stage: when and in what order
buckets are launched is the same at every stage (buckets.py). Both give the optimizer this
rank's chunks of the averaged gradients (owned()), views that the reductions write into.

Stage 1's chunk costs no memory beyond the full gradient buffer. At stage 2 a rank holds psi/N
gradients between steps, and during backward about the buckets in flight plus the gradients of
the bucket being filled. Inside no_sync() the per-parameter gradients simply stay and
accumulate, in full, until a backward outside it reduces them (as in PyTorch FSDP's no_sync).

Arrays are NumPy's or CuPy's (the model's array module), which has no types: Any.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Tuple

from .ledger import held_bytes

if TYPE_CHECKING:
    from .flat import FlatParams
    from .ledger import CountingComm
    from .shards import Shards


class FullGrads:
    def __init__(self, flat: FlatParams, comm: CountingComm, buckets: List[List[int]],
                 shards: Shards, scatter: bool) -> None:
        """scatter: reduce-scatter each bucket (stage 1) rather than all-reduce it (stage 0)."""
        self.flat, self.comm, self.buckets, self.shards = flat, comm, buckets, shards
        self.scatter = scatter

    def reduce(self, b: int) -> Any:
        """Start bucket b's reduction; return its Work."""
        bucket = self.buckets[b]
        for i in bucket:
            self.flat.adopt_grad(i)
        start, stop = self.flat.span(bucket)
        g = self.flat.grad[start:stop]
        if not self.scatter:
            return self.comm.all_reduce(g, op="avg", out=g, async_op=True)
        lo, hi = self.shards.local(b)
        # in place: the ring reads our data of chunk r only at its last step, where it writes it
        return self.comm.reduce_scatter(g, op="avg", out=g[lo:hi], async_op=True)

    def owned(self) -> List[Any]:
        return self.shards.of_flat(self.flat.grad)

    def done(self) -> None:
        """Every launched reduction has finished."""

    def zero_grad(self) -> None:
        self.flat.zero_grad()

    def nbytes(self) -> int:
        return held_bytes([self.flat.grad])


class ShardedGrads:
    def __init__(self, flat: FlatParams, comm: CountingComm, buckets: List[List[int]],
                 shards: Shards) -> None:
        self.flat, self.comm, self.buckets, self.shards = flat, comm, buckets, shards
        self.grad_shard = flat.xp.zeros(shards.count, flat.dtype)
        self._in_flight: List[Tuple[Any, Any]] = []  # (work, bucket buffer): dropped once the reduce-scatter is done

    def reduce(self, b: int) -> Any:
        self._drop_finished()
        buf = self._bucket_gradients(self.buckets[b])
        work = self.comm.reduce_scatter(buf, op="avg", out=self.shards.chunk(self.grad_shard, b),
                                        async_op=True)
        self._in_flight.append((work, buf))
        return work

    def _bucket_gradients(self, bucket: List[int]) -> Any:
        """The bucket's gradients in one new buffer; the parameters' own arrays are let go."""
        start, stop = self.flat.span(bucket)
        buf = self.flat.xp.empty(stop - start, self.flat.dtype)
        for i in bucket:
            p = self.flat.params[i]
            lo, hi = self.flat.range(i)
            buf[lo - start:hi - start] = 0 if p.grad is None else p.grad.ravel()
            p.grad = None
        return buf

    def _drop_finished(self) -> None:
        """Let go of the bucket buffers whose reduce-scatter is done (wait() on a finished Work
        returns at once and drops the communicator's reference to the input)."""
        still = []
        for work, buf in self._in_flight:
            if work.done():
                work.wait()
            else:
                still.append((work, buf))
        self._in_flight = still

    def owned(self) -> List[Any]:
        return self.shards.of_storage(self.grad_shard)

    def done(self) -> None:
        self._in_flight = []

    def zero_grad(self) -> None:
        for p in self.flat.params:
            p.grad = None  # the shard needs no zeroing: every reduce-scatter overwrites it
        self._in_flight = []

    def nbytes(self) -> int:
        return held_bytes([self.grad_shard] + [buf for _, buf in self._in_flight]
                          + [p.grad for p in self.flat.params])
