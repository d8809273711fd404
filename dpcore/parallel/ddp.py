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

DataParallel(..., zero_stage=1|2|3) builds the ZeRO engine of that stage instead (zero1.py,
zero2.py, zero3.py): small subclasses that change how a bucket is reduced (_reduce_bucket), what
an update does (_update) and what is kept, and share everything else here. The optimizer always
gets one tensor per range in `self.owned`: the flat ranges this rank updates (all of it here).
mixed_precision="float16"|"bfloat16" stores parameters and gradients in 2 bytes and gives the
optimizer float32 master copies of those ranges instead (mixed.py).
"""
import time
from contextlib import contextmanager

from ..optim import AdamW
from ..tensor import Tensor, is_grad_enabled
from . import checkpoint
from .flat import FlatParams
from .ledger import CountingComm, held_bytes
from .mixed import MixedPrecision, low_dtype


class DataParallel:
    full_grads = True  # a flat gradient buffer for the whole model (ZeRO-2/3: only a shard)

    def __new__(cls, model=None, comm=None, zero_stage=0, *args, **kwargs):
        if cls is DataParallel:
            cls = engine_class(zero_stage)
        return super().__new__(cls)

    def __init__(self, model, comm, zero_stage=0, optimizer=AdamW, lr=1e-3, bucket_cap_mb=25,
                 overlap=True, mixed_precision=None, loss_scale=None, **optimizer_kwargs):
        self.module, self.zero_stage, self.overlap = model, zero_stage, overlap
        self.comm = CountingComm(comm)
        params = [p for p in model.parameters() if p.requires_grad]
        if mixed_precision:
            low = low_dtype(mixed_precision)
            for p in params:
                p.data, p.grad = p.data.astype(low), None
        self.flat = FlatParams(params, grads=self.full_grads)
        self.comm.broadcast(self.flat.data, root=0)  # every rank starts from rank 0's parameters
        self.buckets = self._make_buckets(bucket_cap_mb * 2**20)
        self._bucket_of = {i: b for b, bucket in enumerate(self.buckets) for i in bucket}
        pieces = self._shard_tensors()
        self.mixed_precision = mixed_precision
        self.mixed = MixedPrecision(pieces, mixed_precision, loss_scale) if mixed_precision \
            else None
        self.optimizer = optimizer(self.mixed.master if self.mixed else pieces, lr=lr,
                                   **optimizer_kwargs)
        for i, p in enumerate(self.flat.params):
            p.register_post_accumulate_grad_hook(lambda p, i=i: self._on_grad(i))
        self._sync = True
        self.comm_wait_s = 0.0  # time step() spent waiting for all-reduces: exposed communication
        self.comm.reset()  # the ledger counts training steps, not the start-up broadcast
        self._new_step()

    def _make_buckets(self, cap_bytes):
        return _buckets(self.flat, cap_bytes)

    def _shard_tensors(self):
        """The tensors the optimizer updates; self.owned: the flat range of each."""
        self.owned = [(0, self.flat.count)]
        return [self.flat.as_tensor()]

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
            self._mark_unused_ready(_leaves(out))
        return out

    def _mark_unused_ready(self, used):
        for i, p in enumerate(self.flat.params):
            if id(p) not in used:
                self._mark_ready(i)

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
        self._works.append(self._reduce_bucket(b))
        self._next = b + 1

    def _reduce_bucket(self, b):
        """Start bucket b's reduction; return its Work."""
        bucket = self.buckets[b]
        for i in bucket:
            self.flat.adopt_grad(i)
        start, stop = self.flat.unit_range(bucket)
        g = self.flat.grad[start:stop]
        return self.comm.all_reduce(g, op="avg", out=g, async_op=True)

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
        self._update()
        self.comm.end_step()
        self._new_step()

    def _update(self):
        self._step_optimizer()

    def _step_optimizer(self):
        """The optimizer's update of the owned ranges; False if mixed precision skipped it (a
        float16 gradient overflowed: every rank skips)."""
        if self.mixed is None:
            self.optimizer.step()
            return True
        return self.mixed.step(self.optimizer, self.comm)

    def scale_loss(self, loss):
        """loss x the loss scale (float16 mixed precision; otherwise loss): backward this."""
        return loss * self.mixed.scale if self.mixed is not None else loss

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
        """Bytes this rank holds now: parameters, gradients, optimizer state (ledger.py)."""
        master = self.mixed.nbytes if self.mixed is not None else 0
        m = {"params": self._params_bytes(), "grads": self._grad_bytes(),
             "optimizer": self.optimizer.memory() + master}
        m["total"] = sum(m.values())
        return m

    def _params_bytes(self):
        return held_bytes([self.flat.data])

    def _grad_bytes(self):
        return held_bytes([self.flat.grad])

    def sent_per_step(self):
        """Bytes this rank sent in the last step (ring accounting, ledger.py), by collective."""
        return dict(self.comm.last_step)

    # -- checkpoints (checkpoint.py) ---------------------------------------------------------------

    def save(self, path):
        """Sharded, atomic: every rank writes what it owns; call on every rank."""
        checkpoint.save(self, path)

    def load(self, path):
        """From a checkpoint saved at any world size and stage; call on every rank."""
        checkpoint.load(self, path)

    def _checkpoint_writers(self):
        return [0]  # every rank holds everything: one copy is enough

    def _load_params(self, read):
        """Set the parameters from read(start, stop): the checkpoint's flat parameters."""
        self.flat.data[...] = read(0, self.flat.count)


def _leaves(out):
    """ids of the leaf tensors the graph of `out` reaches: the parameters this forward used."""
    return {id(t) for t in out._topo() if t.is_leaf}


def engine_class(zero_stage):
    """The engine of a ZeRO stage: 0 is this module's DataParallel."""
    if zero_stage == 0:
        return DataParallel
    if zero_stage == 1:
        from .zero1 import ZeroStage1
        return ZeroStage1
    if zero_stage == 2:
        from .zero2 import ZeroStage2
        return ZeroStage2
    if zero_stage == 3:
        from .zero3 import ZeroStage3
        return ZeroStage3
    raise ValueError(f"DataParallel: zero_stage must be 0, 1, 2 or 3, not {zero_stage!r}")


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
