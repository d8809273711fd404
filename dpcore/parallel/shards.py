"""ZeRO's sharding in one place: which chunk of each span a rank owns, the optimizer's tensors
over those chunks, and the all-gather that rebuilds the spans from them.

A span is a run [start, stop) of the flat buffers (flat.py): at stages 1-2 one gradient bucket,
at stage 3 one unit (which is also its bucket). Each span is sharded on its own: rank r owns
chunk shard_range(span size, N, r) of it. A bucket's reduce-scatter then hands each rank exactly
its chunk, and its all-gather rebuilds the bucket, so the collectives overlap backward bucket by
bucket. With a single bucket (small models, the default bucket size) this is shard_range over
the whole flat buffer.

Where a rank keeps only its chunks (the gradient shard at stages 2-3, the parameter shard at
stage 3) they lie one after another, in span order, in one contiguous storage array.

At stage 0 every rank owns everything: one span, the whole buffer, sharded as if the rank were
alone (size 1). So the optimizer's tensors, and a checkpoint's ranges and writers, come from the
same code at every stage.
"""
from __future__ import annotations

from typing import Any, Iterable, List, Sequence, Tuple

from ..sharding import shard_range
from ..tensor import Tensor

# [start, stop) of the flat buffers
Range = Tuple[int, int]


class Shards:
    """Rank's chunk of each span, in flat coordinates (chunks), and where it sits in the shard
    storage (offsets)."""

    def __init__(self, spans: Iterable[Range], rank: int, size: int) -> None:
        self.spans, self.rank, self.size = list(spans), rank, size
        self.chunks: List[Range] = []
        self.offsets = [0]
        for start, stop in self.spans:
            lo, hi = shard_range(stop - start, size, rank)
            self.chunks.append((start + lo, start + hi))
            self.offsets.append(self.offsets[-1] + hi - lo)

    @property
    def count(self) -> int:
        """Elements this rank holds over all spans: the length of its shard storage."""
        return self.offsets[-1]

    def local(self, s: int) -> Range:
        """(lo, hi) of span s's chunk inside the span: the reduce-scatter output slice."""
        return self.chunks[s][0] - self.spans[s][0], self.chunks[s][1] - self.spans[s][0]

    def chunk(self, storage: Any, s: int) -> Any:
        """Span s's chunk: a view of the shard storage array."""
        return storage[self.offsets[s]:self.offsets[s + 1]]

    def of_storage(self, storage: Any) -> List[Any]:
        """Every chunk, in span order, as views of the shard storage array."""
        return [self.chunk(storage, s) for s in range(len(self.spans))]

    def of_flat(self, flat: Any) -> List[Any]:
        """Every chunk, in span order, as views of an array in flat layout."""
        return [flat[lo:hi] for lo, hi in self.chunks]


def optimizer_tensors(params: Sequence[Any], grads: Sequence[Any]) -> List[Tensor]:
    """One tensor per owned chunk, over that chunk's parameters and gradients (arrays in chunk
    order from the parameter store and the gradient sync): what the optimizer updates in place."""
    assert len(params) == len(grads), "a parameter and a gradient chunk per span"
    tensors = []
    for data, grad in zip(params, grads):
        t = Tensor(data)
        t.grad = grad
        tensors.append(t)
    return tensors


def all_gather_chunks(comm: Any, shards: Shards, chunks: Sequence[Any],
                      out: Any) -> List[Any]:
    """Start rebuilding every span of `out` (flat layout) from every rank's chunk of it (`chunks`:
    this rank's, in span order); all in flight at once, issued in span order as on every rank.
    Returns the Works."""
    assert len(chunks) == len(shards.spans), "a chunk per span"
    return [comm.all_gather(chunk, out=out[start:stop], async_op=True)
            for chunk, (start, stop) in zip(chunks, shards.spans)]
