"""The parameter store of ZeRO stage 3: each rank keeps only its shard of the parameters.

Rank r keeps its chunk of every unit (units.py, shards.py) in one contiguous parameter shard,
and the optimizer updates that shard in place, chunk by chunk. A unit's full parameters live in
a GatheredUnit (gathered.py) whose memory is there only while needed:

  forward:  all-gather the unit just before the module's forward, release it right after;
  backward: an identity node on the module's output runs first when backward reaches it and
            gathers the unit again; once the last of the unit's gradients has arrived the unit
            is released (its gradients are then reduce-scattered as at stage 2: grads.py).

While one unit is in use the next one's all-gather is already in flight (prefetch): the next
in the order the first forward met them, and the previous one in backward.

Bytes sent per rank and step: (N-1)/N psi for each of the forward gathers, the backward gathers
and the reduce-scatters: 3 psi for large N, one more psi than stages 0-2.

What it asks of the model: outside a forward the parameters read as zeros, so take them with
engine.state_dict() (a collective); a module must not return a view of its own parameters.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Sequence, Set

from .gathered import GatheredUnit
from .ledger import held_bytes
from .shards import all_gather_chunks
from .units import module_units, wrap_forward

if TYPE_CHECKING:
    from ..nn import Module
    from .flat import FlatParams
    from .ledger import CountingComm
    from .shards import Shards


class ShardedParams:
    needs_used = True  # expect_grads counts the gradients each unit's backward will deliver

    def __init__(self, module: Module, flat: FlatParams, comm: CountingComm,
                 units: List[List[int]], shards: Shards, prefetch: bool) -> None:
        self.module, self.flat, self.comm, self.shards = module, flat, comm, shards
        self.units, self.prefetch = units, prefetch
        xp, dtype = flat.xp, flat.dtype
        self.param_shard = xp.concatenate(shards.of_flat(flat.data) or [xp.empty(0, dtype)])
        self.gathered = [GatheredUnit(stop - start, dtype, xp) for start, stop in shards.spans]
        for u, unit in enumerate(units):  # the parameters now view their gathered unit
            start = shards.spans[u][0]
            for i in unit:
                p, (lo, hi) = flat.params[i], flat.range(i)
                p.data = self.gathered[u].data[lo - start:hi - start].reshape(p.data.shape)
        flat.data = None  # the full copy goes: only the shard stays
        self._unit_of = {i: u for u, unit in enumerate(units) for i in unit}
        self._order: List[int] = []
        self._first_forward = True  # units in forward order, for prefetch
        self._active = [0] * len(units)   # forwards running that use the unit
        self._awaited = [0] * len(units)  # gradients this backward still owes it
        for m, needed in module_units(module, flat, units):
            wrap_forward(self, m, needed)

    def owned(self) -> List[Any]:
        return self.shards.of_storage(self.param_shard)

    # -- gather and release ---------------------------------------------------------------------

    def _gather(self, u: int, wait: bool = True) -> None:
        unit = self.gathered[u]
        if not unit.resident:
            unit.work = self.comm.all_gather(self.shards.chunk(self.param_shard, u),
                                             out=unit.data, async_op=True)
            unit.resident = True
        if wait and unit.work is not None:
            self.comm.wait_all([unit.work])
            unit.work = None

    def _release(self, u: int) -> None:
        if self.gathered[u].resident and not self._active[u]:
            self.gathered[u].release()

    def release(self) -> None:
        """Give back every unit no forward is using (also what was prefetched and never used)."""
        for u in range(len(self.gathered)):
            self._release(u)

    def gather_for_forward(self, units: Sequence[int]) -> None:
        for u in units:
            if self._first_forward and u not in self._order:
                self._order.append(u)
            self._gather(u)
            self._active[u] += 1
        self._prefetch(units[-1], +1)

    def after_module_forward(self, units: Sequence[int]) -> None:
        for u in units:
            self._active[u] -= 1
            self._release(u)

    def gather_for_backward(self, units: Sequence[int]) -> None:
        for u in units:
            self._gather(u)
        self._prefetch(units[0], -1)

    def _prefetch(self, u: int, direction: int) -> None:
        """Start gathering the unit next to u in forward order (direction -1: backward's)."""
        if self.prefetch and not self._first_forward and u in self._order:
            k = self._order.index(u) + direction
            if 0 <= k < len(self._order):
                self._gather(self._order[k], wait=False)

    # -- the engine's hooks ---------------------------------------------------------------------

    def forward_done(self) -> None:
        self._first_forward = False  # the forward order is known: prefetch can follow it

    def expect_grads(self, used: Set[int]) -> None:
        """used: ids of the parameters the forward used, each owing its unit one gradient."""
        for u, unit in enumerate(self.units):
            self._awaited[u] = sum(id(self.flat.params[i]) in used for i in unit)

    def grad_ready(self, i: int) -> None:
        u = self._unit_of[i]
        self._awaited[u] -= 1
        if self._awaited[u] == 0:  # the unit's backward is over: nothing reads it any more
            self._release(u)

    def update(self, step: Callable[[], bool]) -> None:
        self.release()  # anything prefetched and never used
        step()  # in place in the shard: the next forward gathers the new parameters

    def nbytes(self) -> int:
        return held_bytes([self.param_shard]) + sum(unit.nbytes for unit in self.gathered)

    # -- whole parameters, on demand ------------------------------------------------------------

    def _full_flat(self) -> Any:
        """All parameters in flat layout, gathered (a collective: call on every rank)."""
        full = self.flat.xp.empty(self.flat.count, self.flat.dtype)
        for work in all_gather_chunks(self.comm, self.shards, self.owned(), full):
            work.wait()
        return full

    def state_dict(self) -> Dict[str, Any]:
        """Full parameters on every rank (a collective), under the model's names."""
        state, full = self.module.state_dict(), self._full_flat()
        names = {id(p): name for name, p in self.module.named_parameters()}
        for i, p in enumerate(self.flat.params):
            lo, hi = self.flat.range(i)
            state[names[id(p)]] = full[lo:hi].reshape(p.data.shape).copy()
        return state

    def load_state_dict(self, state: Dict[str, Any], strict: bool = True) -> Any:
        """A collective: the units are gathered, so that a partial state keeps the rest."""
        for u in range(len(self.gathered)):
            self._gather(u)
        result = self.module.load_state_dict(state, strict)  # into the units' buffers
        for u, chunk in enumerate(self.owned()):
            lo, hi = self.shards.local(u)
            chunk[...] = self.gathered[u].data[lo:hi]
        self.release()
        return result

    def load(self, read: Callable[[int, int], Any]) -> None:
        """Set the shard from read(start, stop): the checkpoint's flat parameters."""
        for chunk, (lo, hi) in zip(self.owned(), self.shards.chunks):
            chunk[...] = read(lo, hi)
