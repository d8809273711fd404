"""DataParallel, zero_stage=0: every rank holds the whole model and averages gradients.

Gradients live in one flat buffer (flat.py), cut into buckets of about bucket_cap_mb taken from
the last parameter backwards, the order in which backward produces them. A bucket is a run of
consecutive parameters, hence a slice of the buffer. When backward has added the last gradient
of a bucket, its all-reduce (avg, in place, async) starts while backward goes on with earlier
layers; step() waits only for what is still in flight.

Buckets are launched strictly in bucket order: collectives on a communicator must be issued in
the same order on every rank, and a bucket that is ready early on one rank must not overtake
one that is late there. Parameters that the forward did not use will get no gradient, so they
count as ready at once (their gradient: whatever is in the buffer, zeros after zero_grad);
step() reduces any bucket still waiting. Nothing ever waits for a gradient that never comes.
"""
import time
from contextlib import contextmanager

from ..optim import AdamW
from ..tensor import Tensor, is_grad_enabled
from .flat import FlatParams


class DataParallel:
    def __init__(self, model, comm, zero_stage=0, optimizer=AdamW, lr=1e-3, bucket_cap_mb=25,
                 overlap=True, **optimizer_kwargs):
        if zero_stage != 0:
            raise NotImplementedError(f"DataParallel: ZeRO stage {zero_stage} is not built yet; "
                                      "use zero_stage=0")
        self.module, self.comm, self.zero_stage, self.overlap = model, comm, zero_stage, overlap
        self.flat = FlatParams(p for p in model.parameters() if p.requires_grad)
        comm.broadcast(self.flat.data, root=0)  # every rank starts from rank 0's parameters
        self.buckets = _buckets(self.flat, bucket_cap_mb * 2**20)
        self._bucket_of = {i: b for b, bucket in enumerate(self.buckets) for i in bucket}
        self.optimizer = optimizer([self.flat.as_tensor()], lr=lr, **optimizer_kwargs)
        for i, p in enumerate(self.flat.params):
            p.register_post_accumulate_grad_hook(lambda p, i=i: self._on_grad(i))
        self._sync = True
        self.comm_wait_s = 0.0  # time step() spent waiting for all-reduces: exposed communication
        self._new_step()

    def _new_step(self):
        self._ready = [False] * len(self.flat.params)
        self._missing = [len(bucket) for bucket in self.buckets]  # gradients still to come
        self._next = 0  # the next bucket to launch
        self._works = []

    # -- forward and backward ---------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        out = self.module(*args, **kwargs)
        if (self._sync and self.overlap and is_grad_enabled() and isinstance(out, Tensor)
                and out.requires_grad):
            used = {id(t) for t in out._topo() if t.is_leaf}
            for i, p in enumerate(self.flat.params):
                if id(p) not in used:
                    self._mark_ready(i)
        return out

    def _on_grad(self, i):
        if self._sync and self.overlap:
            self._mark_ready(i)

    def _mark_ready(self, i):
        b = self._bucket_of[i]
        if self._ready[i]:
            if b < self._next:
                raise RuntimeError(
                    "DataParallel: a gradient arrived after its bucket was reduced (two "
                    "backwards in one step?); accumulate inside engine.no_sync()")
            return
        self._ready[i] = True
        self._missing[b] -= 1
        while self._next < len(self.buckets) and self._missing[self._next] == 0:
            self._launch(self._next)

    def _launch(self, b):
        bucket = self.buckets[b]
        for i in bucket:
            self.flat.adopt_grad(i)
        start, stop = self.flat.range(bucket[-1])[0], self.flat.range(bucket[0])[1]
        g = self.flat.grad[start:stop]
        self._works.append(self.comm.all_reduce(g, op="avg", out=g, async_op=True))
        self._next = b + 1

    @contextmanager
    def no_sync(self):
        """Backward passes inside only accumulate gradients; the next one outside (or step())
        reduces the sum."""
        previous, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = previous

    # -- update -----------------------------------------------------------------------------------

    def _finish_reduction(self):
        while self._next < len(self.buckets):
            self._launch(self._next)
        t0 = time.perf_counter()
        for work in self._works:
            work.wait()
        self.comm_wait_s += time.perf_counter() - t0

    def step(self):
        self._finish_reduction()
        self.optimizer.step()
        self._new_step()

    def zero_grad(self):
        for work in self._works:  # never zero a buffer that a collective is still reading
            work.wait()
        self.flat.zero_grad()
        self._new_step()

    # -- the rest ---------------------------------------------------------------------------------

    def parameters(self):
        return self.module.parameters()

    def state_dict(self):
        return self.module.state_dict()

    def load_state_dict(self, state, strict=True):
        return self.module.load_state_dict(state, strict)

    def train(self, mode=True):
        self.module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def memory(self):
        """Bytes held on this rank: parameters, gradients, optimizer state."""
        return {"params": self.flat.data.nbytes, "grads": self.flat.grad.nbytes,
                "optimizer": self.optimizer.memory()}


def _buckets(flat, cap_bytes):
    """Parameter indices grouped from the last backwards, each group about cap_bytes."""
    buckets, current, nbytes = [], [], 0
    for i in reversed(range(len(flat.params))):
        current.append(i)
        nbytes += flat.params[i].data.nbytes
        if nbytes >= cap_bytes:
            buckets.append(current)
            current, nbytes = [], 0
    if current:
        buckets.append(current)
    return buckets
