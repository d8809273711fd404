"""ZeRO stage 3: each rank keeps only its shard of the parameters too.

A unit is the parameters one module owns itself (a Linear's weight and bias), a run of the flat
buffer; rank r keeps its chunk of every unit (flat.Shards) in one contiguous parameter shard,
and the optimizer updates that shard in place, unit chunk by unit chunk. The module's full
parameters live in a GatheredUnit whose memory is there only while needed:

  forward:  all-gather the unit just before the module's forward, release it right after;
  backward: an identity node on the module's output runs first when backward reaches it and
            gathers the unit again; once the last of the unit's gradients has arrived the unit
            is released and its gradients are reduce-scattered as at stage 2 (zero2.py).

While one unit is in use the next one's all-gather is already in flight (prefetch): the next
in the order the first forward met them, and the previous one in backward. Units are reduced in
reverse parameter order, as buckets are, so every rank issues its collectives in one order.

Bytes sent per rank and step: (N-1)/N psi for each of the forward gathers, the backward gathers
and the reduce-scatters: 3 psi for large N, one more psi than stages 0-2.

What it asks of the model: the engine wraps the forward of each module that owns parameters (an
instance attribute, so build one engine per model); outside a forward the parameters read as
zeros, so take them with engine.state_dict() (a collective); a module must not return a view of
its own parameters. bucket_cap_mb plays no part: units follow the modules.
"""
import time

from ..tensor import Tensor, is_grad_enabled
from .ddp import _leaves
from .flat import Shards
from .gathered import GatheredUnit
from .ledger import held_bytes
from .zero2 import ZeroStage2


class ZeroStage3(ZeroStage2):
    def __init__(self, model, comm, zero_stage=3, *args, prefetch=True, **kwargs):
        self.prefetch = prefetch
        super().__init__(model, comm, zero_stage, *args, **kwargs)
        self._order, self._first_forward = [], True  # units in forward order, for prefetch
        self._active = [0] * len(self.buckets)        # forwards running that use the unit
        self._awaited = [0] * len(self.buckets)       # gradients this backward still owes it
        for module, units in self._module_units(model):
            _wrap_forward(self, module, units)

    # -- units and shards ---------------------------------------------------------------------

    def _make_buckets(self, cap_bytes):
        """One unit per module that owns parameters, last module first (backward's order)."""
        owner = self._owners()
        units = []
        for i, p in enumerate(self.flat.params):
            if units and owner[id(p)] is owner[id(self.flat.params[units[-1][0]])]:
                units[-1].insert(0, i)
            else:
                units.append([i])
        return units[::-1]

    def _owners(self):
        """parameter id -> the module it is registered in first (parameter order's owner)."""
        owner = {}
        for _, module in self.module.named_modules():
            for p in module._parameters.values():
                owner.setdefault(id(p), module)
        return owner

    def _module_units(self, model):
        """(module, units its forward needs) for every module that holds a flat parameter."""
        unit_of = {id(self.flat.params[i]): u for u, bucket in enumerate(self.buckets)
                   for i in bucket}
        for _, module in model.named_modules():
            units = sorted({unit_of[id(p)] for p in module._parameters.values()
                            if id(p) in unit_of})
            if units:
                yield module, units

    def _shard_tensors(self):
        units = [self.flat.unit_range(bucket) for bucket in self.buckets]
        self.shards = Shards(units, self.comm.rank, self.comm.size)
        self.owned = list(self.shards.chunks)
        xp, dtype = self.flat.xp, self.flat.dtype
        self.param_shard = xp.concatenate([self.flat.data[lo:hi] for lo, hi in self.owned]
                                          or [xp.empty(0, dtype)])
        self.grad_shard = xp.zeros(self.shards.count, dtype)
        self.full = [GatheredUnit(stop - start, dtype, xp) for start, stop in units]
        for u, bucket in enumerate(self.buckets):  # the parameters now view their unit
            start = units[u][0]
            for i in bucket:
                p, (lo, hi) = self.flat.params[i], self.flat.range(i)
                p.data = self.full[u].data[lo - start:hi - start].reshape(p.data.shape)
        self.flat.data = None  # the full copy goes: only the shard stays
        tensors = []
        for u in range(len(units)):
            t = Tensor(self.param_shard[slice(*self.shards.storage(u))])
            t.grad = self.grad_shard[slice(*self.shards.storage(u))]
            tensors.append(t)
        return tensors

    # -- gather and release ---------------------------------------------------------------------

    def _gather(self, u, wait=True):
        unit = self.full[u]
        if not unit.resident:
            unit.work = self.comm.all_gather(self.param_shard[slice(*self.shards.storage(u))],
                                             out=unit.data, async_op=True)
            unit.resident = True
        if wait and unit.work is not None:
            t0 = time.perf_counter()
            unit.work.wait()
            unit.work = None
            self.comm_wait_s += time.perf_counter() - t0

    def _release(self, u):
        if self.full[u].resident and not self._active[u]:
            self.full[u].release()

    def _release_all(self):
        for u in range(len(self.full)):
            self._release(u)

    def _gather_for_forward(self, units):
        for u in units:
            if self._first_forward and u not in self._order:
                self._order.append(u)
            self._gather(u)
            self._active[u] += 1
        self._prefetch(units[-1], +1)

    def _after_module_forward(self, units):
        for u in units:
            self._active[u] -= 1
            self._release(u)

    def _gather_for_backward(self, units):
        for u in units:
            self._gather(u)
        self._prefetch(units[0], -1)

    def _prefetch(self, u, direction):
        """Start gathering the unit next to u in forward order (direction -1: backward's)."""
        if self.prefetch and not self._first_forward and u in self._order:
            k = self._order.index(u) + direction
            if 0 <= k < len(self._order):
                self._gather(self._order[k], wait=False)

    # -- the engine's hooks ---------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        out = self.module(*args, **kwargs)
        self._first_forward = False
        if is_grad_enabled() and isinstance(out, Tensor) and out.requires_grad:
            used = _leaves(out)
            for u, bucket in enumerate(self.buckets):
                self._awaited[u] = sum(id(self.flat.params[i]) in used for i in bucket)
            if self._sync and self.overlap:
                self._mark_unused_ready(used)
        return out

    def _on_grad(self, i):
        u = self._bucket_of[i]
        self._awaited[u] -= 1
        if self._awaited[u] == 0:  # the unit's backward is over: nothing reads it any more
            self._release(u)
        super()._on_grad(i)

    def _update(self):
        self._release_all()  # anything prefetched and never used
        self._step_optimizer()  # the next forward gathers the new parameters

    def zero_grad(self):
        super().zero_grad()
        self._release_all()

    def _params_bytes(self):
        return held_bytes([self.param_shard]) + sum(unit.nbytes for unit in self.full)

    # -- whole parameters, on demand ------------------------------------------------------------

    def _full_flat(self):
        """All parameters in flat layout, gathered (a collective: call on every rank)."""
        full = self.flat.xp.empty(self.flat.count, self.flat.dtype)
        works = [self.comm.all_gather(self.param_shard[slice(*self.shards.storage(u))],
                                      out=full[start:stop], async_op=True)
                 for u, (start, stop) in enumerate(self.shards.units)]
        for work in works:
            work.wait()
        return full

    def state_dict(self):
        """Full parameters on every rank (a collective), under the model's names."""
        state, full = self.module.state_dict(), self._full_flat()
        names = {id(p): name for name, p in self.module.named_parameters()}
        for i, p in enumerate(self.flat.params):
            lo, hi = self.flat.range(i)
            state[names[id(p)]] = full[lo:hi].reshape(p.data.shape).copy()
        return state

    def load_state_dict(self, state, strict=True):
        """A collective: the units are gathered, so that a partial state keeps the rest."""
        for u in range(len(self.full)):
            self._gather(u)
        result = self.module.load_state_dict(state, strict)  # into the units' buffers
        for u in range(len(self.full)):
            lo, hi = self.shards.local(u)
            self.param_shard[slice(*self.shards.storage(u))] = self.full[u].data[lo:hi]
        self._release_all()
        return result

    def _load_params(self, read):
        for u, (lo, hi) in enumerate(self.shards.chunks):
            self.param_shard[slice(*self.shards.storage(u))] = read(lo, hi)


def _wrap_forward(engine, module, units):
    """module.forward gathers its units first, releases them after, and marks its output so
    that backward gathers them again before it enters the module."""
    forward = module.forward

    def gathered_forward(*args, **kwargs):
        engine._gather_for_forward(units)
        try:
            out = forward(*args, **kwargs)
        finally:
            engine._after_module_forward(units)
        return _before_backward(out, lambda: engine._gather_for_backward(units))

    object.__setattr__(module, "forward", gathered_forward)  # an instance attribute: not a layer


def _before_backward(out, gather):
    """out, through an identity node whose backward calls gather() first."""
    if isinstance(out, (tuple, list)):
        return type(out)(_before_backward(o, gather) for o in out)
    if not (isinstance(out, Tensor) and out.requires_grad and is_grad_enabled()):
        return out

    def backward(g):
        gather()
        out._accumulate(g)
    return Tensor._result(out.data, (out,), backward)
