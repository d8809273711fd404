"""ZeRO stage 1: the optimizer state is sharded; parameters and gradients stay whole.

Each gradient bucket is reduce-scattered (avg) instead of all-reduced: rank r ends with the
averaged gradient of its chunk of the bucket (flat.Shards), written in place over its own
gradients there, so the chunk costs no memory beyond the full gradient buffer. The optimizer
holds one tensor per bucket chunk: views into the flat parameters and gradients, so its state
(Adam's moments) exists for 1/N of the model. After the update each bucket is all-gathered in
place, from the chunk that was just updated into the whole bucket.

Bytes sent per rank and step: (N-1)/N psi in the reduce-scatters and (N-1)/N psi in the
all-gathers, 2 psi for large N, the same as the all-reduce of stage 0.
"""
import time

from .ddp import DataParallel
from .flat import Shards


class ZeroStage1(DataParallel):
    def _shard_tensors(self):
        units = [self.flat.unit_range(bucket) for bucket in self.buckets]
        self.shards = Shards(units, self.comm.rank, self.comm.size)
        self.owned = list(self.shards.chunks)
        return [self.flat.as_tensor(lo, hi) for lo, hi in self.owned]

    def _reduce_bucket(self, b):
        bucket = self.buckets[b]
        for i in bucket:
            self.flat.adopt_grad(i)
        start, stop = self.shards.units[b]
        g = self.flat.grad[start:stop]
        lo, hi = self.shards.local(b)
        # in place: the ring reads our data of chunk r only at its last step, where it writes it
        return self.comm.reduce_scatter(g, op="avg", out=g[lo:hi], async_op=True)

    def _update(self):
        if self._step_optimizer():  # all ranks agree when a mixed-precision step is skipped
            self._gather_params(self.flat.data)

    def _gather_params(self, full):
        """Every bucket's updated chunks into `full` (flat layout), all in flight at once."""
        works = []
        for b, (start, stop) in enumerate(self.shards.units):
            lo, hi = self.shards.chunks[b]
            works.append(self.comm.all_gather(full[lo:hi], out=full[start:stop],
                                              async_op=True))
        t0 = time.perf_counter()
        for work in works:
            work.wait()
        self.comm_wait_s += time.perf_counter() - t0

    def _checkpoint_writers(self):
        return list(range(self.comm.size))  # each owns a different part of the optimizer state
