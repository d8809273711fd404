"""Parameter stores: where the parameters live, and what the update and the forward need for it.

  FullParams     stages 0-2   the flat parameter buffer, whole on every rank; at stages 1-2 the
                              optimizer updates only this rank's chunks, so every bucket is
                              all-gathered in place after the update, from the chunks just
                              updated into the whole bucket
  ShardedParams  stage 3      only this rank's parameter shard; each unit is gathered around
                              its module's forward and backward (sharded_params.py)

The cut is here because this is all that forward, the update and the checkpoints see of a ZeRO
stage. A store gives the optimizer this rank's chunks of the parameters (owned()), runs the
update (update(step)), and answers the engine's hooks, which only stage 3 needs: forward_done,
expect_grads, grad_ready and release are no-ops here.

Bytes sent per rank and step by the all-gathers of stages 1-2: (N-1)/N psi, which with the
reduce-scatters' (N-1)/N psi makes 2 psi for large N, the same as the all-reduce of stage 0.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Set

from .ledger import held_bytes
from .shards import all_gather_chunks

if TYPE_CHECKING:
    from ..nn import Module
    from .flat import FlatParams
    from .ledger import CountingComm
    from .shards import Shards


class FullParams:
    needs_used = False  # expect_grads does not need the parameters each forward used

    def __init__(self, module: Module, flat: FlatParams, comm: CountingComm, shards: Shards,
                 gather: bool) -> None:
        """gather: all-gather the chunks after each update (stages 1-2)."""
        self.module, self.flat, self.comm, self.shards = module, flat, comm, shards
        self.gather = gather

    def owned(self) -> List[Any]:
        return self.shards.of_flat(self.flat.data)

    def update(self, step: Callable[[], bool]) -> None:
        """step(): the optimizer's update of the owned chunks; False if mixed precision skipped
        it, which every rank agrees on, so none of them gathers."""
        if step() and self.gather:
            data = self.flat.data  # in place: each chunk is a view of the span it rebuilds
            self.comm.wait_all(all_gather_chunks(self.comm, self.shards, self.shards.of_flat(data),
                                                 data))

    def forward_done(self) -> None:
        pass

    def expect_grads(self, used: Set[int]) -> None:
        pass

    def grad_ready(self, i: int) -> None:
        pass

    def release(self) -> None:
        pass

    def nbytes(self) -> int:
        return held_bytes([self.flat.data])

    def state_dict(self) -> Dict[str, Any]:
        return self.module.state_dict()

    def load_state_dict(self, state: Dict[str, Any], strict: bool = True) -> Any:
        return self.module.load_state_dict(state, strict)

    def load(self, read: Callable[[int, int], Any]) -> None:
        """Set the parameters from read(start, stop): the checkpoint's flat parameters."""
        self.flat.data[...] = read(0, self.flat.count)
