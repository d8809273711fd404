"""ZeRO stage 2: as stage 1, and each rank keeps only its gradient shard.

There is no flat gradient buffer. Backward leaves each parameter's gradient in an array of its
own (autograd allocates it); when a bucket is ready its gradients are copied into one transient
bucket buffer and dropped, the bucket is reduce-scattered from there into this rank's gradient
shard (one contiguous array, 1/N of the model), and the bucket buffer is dropped as soon as its
reduce-scatter has finished. So between steps a rank holds psi/N gradients, and during backward
about the buckets in flight plus the gradients of the bucket being filled.

Inside no_sync() the per-parameter gradients simply stay and accumulate, in full, until a
backward outside it reduces them (as in PyTorch FSDP's no_sync).
"""
from .flat import Shards
from .ledger import held_bytes
from .zero1 import ZeroStage1


class ZeroStage2(ZeroStage1):
    full_grads = False

    def _shard_tensors(self):
        units = [self.flat.unit_range(bucket) for bucket in self.buckets]
        self.shards = Shards(units, self.comm.rank, self.comm.size)
        self.owned = list(self.shards.chunks)
        self.grad_shard = self.flat.xp.zeros(self.shards.count, self.flat.dtype)
        tensors = []
        for b, (lo, hi) in enumerate(self.owned):
            t = self.flat.as_tensor(lo, hi)
            t.grad = self.grad_shard[slice(*self.shards.storage(b))]
            tensors.append(t)
        return tensors

    def _new_step(self):
        super()._new_step()
        self._in_flight = []  # (work, bucket buffer): dropped once the reduce-scatter is done

    def _reduce_bucket(self, b):
        self._drop_finished()
        start, stop = self.shards.units[b]
        buf = self._bucket_gradients(self.buckets[b], start, stop)
        work = self.comm.reduce_scatter(buf, op="avg", async_op=True,
                                        out=self.grad_shard[slice(*self.shards.storage(b))])
        self._in_flight.append((work, buf))
        return work

    def _bucket_gradients(self, bucket, start, stop):
        """The bucket's gradients in one new buffer; the parameters' own arrays are let go."""
        buf = self.flat.xp.empty(stop - start, self.flat.dtype)
        for i in bucket:
            p = self.flat.params[i]
            lo, hi = self.flat.range(i)
            buf[lo - start:hi - start] = 0 if p.grad is None else p.grad.ravel()
            p.grad = None
        return buf

    def _drop_finished(self):
        """Let go of the bucket buffers whose reduce-scatter is done (wait() on a finished Work
        returns at once and drops the communicator's reference to the input)."""
        still = []
        for work, buf in self._in_flight:
            if work.done():
                work.wait()
            else:
                still.append((work, buf))
        self._in_flight = still

    def _finish_reduction(self):
        super()._finish_reduction()
        self._in_flight = []

    def zero_grad(self):
        for work in self._works:
            work.wait()
        for p in self.flat.params:
            p.grad = None  # the shard needs no zeroing: every reduce-scatter overwrites it
        self._new_step()

    def _grad_bytes(self):
        return held_bytes([self.grad_shard] + [buf for _, buf in self._in_flight]
                          + [p.grad for p in self.flat.params])

