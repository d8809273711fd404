"""DataParallel: data parallelism at ZeRO stages 0-3, one engine with two strategies per stage.

Every rank runs the whole model on its slice of the batch. Its parameters live in flat buffers
(flat.py); their gradients are averaged across ranks bucket by bucket, each bucket's collective
started during backward as soon as its gradients are in, in bucket order (buckets.py); the
optimizer updates the chunks of the buffers this rank owns (shards.py: all of it at stage 0).

What a stage changes is said by two objects that stages.py picks:
  self.grad_sync    where the gradients live and how a bucket is reduced (grads.py)
  self.param_store  where the parameters live, what the update and forward need (params.py)
Everything else is the same at every stage and lives here once: the backward hooks, no_sync,
waiting, mixed precision, the ledger, checkpoints.

The optimizer gets one tensor per owned chunk (self.owned: their flat ranges, the whole buffer
at stage 0). mixed_precision="float16"|"bfloat16" stores parameters and gradients in 2 bytes and
gives the optimizer float32 master copies of those chunks instead (mixed.py).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Set

from .. import trace
from ..optim import AdamW
from ..tensor import Tensor, is_grad_enabled
from . import checkpoint, stages
from .buckets import Launcher
from .flat import FlatParams
from .ledger import CountingComm
from .mixed import MixedPrecision, low_dtype
from .shards import optimizer_tensors

if TYPE_CHECKING:
    from ..comm import Communicator
    from ..nn import Module, Parameter
    from ..optim import Optimizer


class DataParallel:
    """Data parallelism around `model`: every rank runs it on its own slice of each batch, and
    backward() reduces the gradients across `comm`'s ranks in buckets of bucket_cap_mb MiB,
    overlapped with the rest of backward (overlap=True). zero_stage 1, 2 and 3 shard the
    optimizer state, then the gradients, then the parameters (ZeRO). optimizer(params, lr=lr,
    **optimizer_kwargs) updates what this rank owns; step() and zero_grad() as in PyTorch.
    mixed_precision "float16" or "bfloat16": 2-byte parameters and gradients with float32
    master weights (float16 with a dynamic loss scale). N ranks on B/N samples each train the
    model one process trains on B (docs/api.md, "Training")."""

    def __init__(self, model: Module, comm: Communicator, zero_stage: int = 0,
                 optimizer: Callable[..., Optimizer] = AdamW, lr: float = 1e-3,
                 bucket_cap_mb: float = 25, overlap: bool = True,
                 mixed_precision: Optional[str] = None, loss_scale: Optional[float] = None, *,
                 prefetch: bool = True, **optimizer_kwargs: Any) -> None:
        """prefetch (stage 3): gather the next unit while the current one is in use."""
        stages.check(zero_stage)
        self.module, self.zero_stage, self.overlap = model, zero_stage, overlap
        self.comm = CountingComm(comm)
        params = [p for p in model.parameters() if p.requires_grad]
        if mixed_precision:
            low = low_dtype(mixed_precision)
            for p in params:
                p.data, p.grad = p.data.astype(low), None
        self.flat = FlatParams(params, grads=stages.keeps_full_grads(zero_stage))
        self.comm.broadcast(self.flat.data, root=0)  # every rank starts from rank 0's parameters
        self.buckets, self.shards, self.grad_sync, self.param_store = stages.build(
            zero_stage, model, self.flat, self.comm, bucket_cap_mb, prefetch)
        self.owned = self.shards.chunks  # the flat ranges this rank updates
        pieces = optimizer_tensors(self.param_store.owned(), self.grad_sync.owned())
        self.mixed_precision = mixed_precision
        self.mixed = MixedPrecision(pieces, mixed_precision, loss_scale) if mixed_precision \
            else None
        self.optimizer = optimizer(self.mixed.master if self.mixed else pieces, lr=lr,
                                   **optimizer_kwargs)
        self.launcher = Launcher(self.buckets, self.grad_sync.reduce)
        for i, p in enumerate(self.flat.params):
            p.register_post_accumulate_grad_hook(lambda p, i=i: self._on_grad(i))
        self._sync = True
        self.comm.reset()  # the ledger counts training steps, not the start-up broadcast

    @property
    def comm_wait_s(self) -> float:
        """Seconds spent waiting for collectives to finish: exposed communication."""
        return self.comm.wait_s

    # -- forward and backward ---------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The model's forward; its backward then reduces the gradients as they are ready."""
        with trace.span("forward"):
            out = self.module(*args, **kwargs)
        self.param_store.forward_done()
        if is_grad_enabled() and isinstance(out, Tensor) and out.requires_grad:
            launching = self._sync and self.overlap
            if launching or self.param_store.needs_used:
                used = _leaves(out)
                self.param_store.expect_grads(used)
                if launching:
                    self._mark_unused_ready(used)
        return out

    def _mark_unused_ready(self, used: Set[int]) -> None:
        for i, p in enumerate(self.flat.params):
            if id(p) not in used:
                self.launcher.mark_ready(i)

    def _on_grad(self, i: int) -> None:
        self.param_store.grad_ready(i)
        if self._sync and self.overlap:
            self.launcher.mark_ready(i)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside only accumulate gradients; the next one outside (or step())
        reduces the sum."""
        previous, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = previous

    # -- update -----------------------------------------------------------------------------------

    def step(self) -> None:
        """Waits for the gradients' collectives and updates the parameters (this rank's shard
        of them from stage 1 on, then gathered where the stage needs them whole)."""
        with trace.span("step"):
            self.launcher.launch_rest()
            self.comm.wait_all(self.launcher.works)
            self.grad_sync.done()
            self.param_store.update(self._step_optimizer)
            self.comm.end_step()
            self.launcher.reset()

    def _step_optimizer(self) -> bool:
        """The optimizer's update of the owned chunks; False if mixed precision skipped it (a
        float16 gradient overflowed: every rank skips)."""
        if self.mixed is None:
            self.optimizer.step()
            return True
        return self.mixed.step(self.optimizer, self.comm)

    def scale_loss(self, loss: Tensor) -> Tensor:
        """loss x the loss scale (float16 mixed precision; otherwise loss): backward this."""
        return loss * self.mixed.scale if self.mixed is not None else loss

    def zero_grad(self) -> None:
        """Clears the gradients for the next step, once no collective still reads them."""
        for work in self.launcher.works:  # never zero a buffer that a collective is still reading
            work.wait()
        self.grad_sync.zero_grad()
        self.launcher.reset()
        self.param_store.release()

    # -- the rest ---------------------------------------------------------------------------------

    def parameters(self) -> Iterator[Parameter]:
        return self.module.parameters()

    def state_dict(self) -> Dict[str, Any]:
        """Full parameters under the model's names (at stage 3 a collective)."""
        return self.param_store.state_dict()

    def load_state_dict(self, state: Dict[str, Any], strict: bool = True) -> Any:
        """At stage 3 a collective."""
        return self.param_store.load_state_dict(state, strict)

    def train(self, mode: bool = True) -> DataParallel:
        self.module.train(mode)
        return self

    def eval(self) -> DataParallel:
        return self.train(False)

    def memory(self) -> Dict[str, int]:
        """Bytes this rank holds now: parameters, gradients, optimizer state (ledger.py)."""
        master = self.mixed.nbytes if self.mixed is not None else 0
        m = {"params": self.param_store.nbytes(), "grads": self.grad_sync.nbytes(),
             "optimizer": self.optimizer.memory() + master}
        m["total"] = sum(m.values())
        return m

    def sent_per_step(self) -> Dict[str, int]:
        """Bytes this rank sent in the last step (ring accounting, ledger.py), by collective."""
        return dict(self.comm.last_step)

    # -- checkpoints (checkpoint.py) ---------------------------------------------------------------

    def save(self, path: str, extra: Optional[Dict[str, Any]] = None) -> None:
        """Sharded, atomic: every rank writes what it owns; call on every rank. `extra` (a
        JSON dict: dpcore.train's epoch) is saved with the state, under its checksum."""
        checkpoint.save(self, path, extra)

    def load(self, path: str) -> Dict[str, Any]:
        """From a checkpoint saved at any world size and stage; call on every rank. Returns
        the `extra` it was saved with ({} if none)."""
        return checkpoint.load(self, path)

    def checkpoint_writers(self) -> List[int]:
        """The ranks whose chunks together hold everything: rank 0 alone at stage 0."""
        return list(range(self.shards.size))

    def load_params(self, read: Callable[[int, int], Any]) -> None:
        """Set the parameters from read(start, stop): the checkpoint's flat parameters."""
        self.param_store.load(read)


def _leaves(out: Tensor) -> Set[int]:
    """ids of the leaf tensors the graph of `out` reaches: the parameters this forward used."""
    return {id(t) for t in out.topological_order() if t.is_leaf}
