"""The ZeRO stages as choices of strategies: the one place that says what each stage shards.

  stage  buckets         gradient sync (grads.py)           parameter store
  0      by size         FullGrads, all-reduce              FullParams
  1      by size         FullGrads, reduce-scatter          FullParams, all-gather after update
  2      by size         ShardedGrads                       FullParams, all-gather after update
  3      one per unit    ShardedGrads                       ShardedParams (sharded_params.py)

A stage is a pair of objects, not a class: the engine (engine.py) runs the same buckets, hooks
and update at every stage and asks these two only what differs. Stage 0 shards nothing: each
rank owns the whole buffer as its one chunk (shards.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Protocol, Set, Tuple

from .buckets import by_size
from .grads import FullGrads, ShardedGrads
from .params import FullParams
from .shards import Shards
from .sharded_params import ShardedParams
from .units import make_units

if TYPE_CHECKING:
    from ..nn import Module
    from .flat import FlatParams
    from .ledger import CountingComm

# Arrays are NumPy's or CuPy's (the model's array module), which has no types: Any.


class GradSync(Protocol):
    """Where the gradients live and how a bucket is reduced (grads.py: FullGrads, ShardedGrads)."""

    def reduce(self, b: int) -> Any:
        """Start bucket b's reduction; return its Work."""

    def owned(self) -> List[Any]:
        """This rank's chunks of the averaged gradients, in span order: the optimizer's."""

    def done(self) -> None:
        """Every launched reduction has finished."""

    def zero_grad(self) -> None: ...

    def nbytes(self) -> int: ...


class ParamStore(Protocol):
    """Where the parameters live, and what the update and forward need (params.py: FullParams,
    sharded_params.py: ShardedParams)."""

    needs_used: bool  # whether expect_grads needs the parameters each forward used

    def owned(self) -> List[Any]:
        """This rank's chunks of the parameters, in span order: the optimizer's."""

    def update(self, step: Callable[[], bool]) -> None:
        """Runs step() (the optimizer's update of the owned chunks; False: skipped) and what the
        stage needs after it."""

    def forward_done(self) -> None: ...

    def expect_grads(self, used: Set[int]) -> None: ...

    def grad_ready(self, i: int) -> None: ...

    def release(self) -> None: ...

    def nbytes(self) -> int: ...

    def state_dict(self) -> Dict[str, Any]: ...

    def load_state_dict(self, state: Dict[str, Any], strict: bool = True) -> Any: ...

    def load(self, read: Callable[[int, int], Any]) -> None: ...


def check(zero_stage: int) -> None:
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"DataParallel: zero_stage must be 0, 1, 2 or 3, not {zero_stage!r}")


def keeps_full_grads(zero_stage: int) -> bool:
    """Whether the stage wants a flat gradient buffer for the whole model (flat.py)."""
    return zero_stage < 2


def build(zero_stage: int, module: Module, flat: FlatParams, comm: CountingComm,
          bucket_cap_mb: float, prefetch: bool
          ) -> Tuple[List[List[int]], Shards, GradSync, ParamStore]:
    """(buckets, shards, gradient sync, parameter store) of the stage, over `flat`, whose
    parameters every rank already agrees on (stage 3 keeps only its shard of them)."""
    if zero_stage == 3:
        buckets = make_units(module, flat)
    else:
        buckets = by_size(flat, bucket_cap_mb * 2**20)
    if zero_stage == 0:
        shards = Shards([(0, flat.count)], rank=0, size=1)
    else:
        shards = Shards([flat.span(bucket) for bucket in buckets], comm.rank, comm.size)
    grads: GradSync
    params: ParamStore
    if zero_stage < 2:
        grads = FullGrads(flat, comm, buckets, shards, scatter=zero_stage == 1)
    else:
        grads = ShardedGrads(flat, comm, buckets, shards)
    if zero_stage < 3:
        params = FullParams(module, flat, comm, shards, gather=zero_stage > 0)
    else:
        params = ShardedParams(module, flat, comm, buckets, shards, prefetch)
    return buckets, shards, grads, params
