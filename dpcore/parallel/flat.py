"""Flat buffers: all parameters in one contiguous array, all gradients in another.

Each parameter's .data and .grad become views into them, in parameter order. So any run of
consecutive parameters (a gradient bucket, a stage-3 unit) and any chunk of one (shards.py) is a
slice [start, stop) that one collective moves and one optimizer call updates.

Its arrays are NumPy's or CuPy's (the model's array module), which has no types: Any.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence, Tuple

from ..sharding import shard_range
from ..tensor import Tensor, array_module

if TYPE_CHECKING:
    from ..nn import Parameter


class FlatParams:
    def __init__(self, params: Iterable[Parameter], grads: bool = True) -> None:
        """grads=False: no flat gradient buffer (ZeRO-2/3 keep only a gradient shard), and every
        parameter's .grad starts as None."""
        self.params = list(params)
        if not self.params:
            raise ValueError("FlatParams: no parameters")
        dtypes = {p.data.dtype for p in self.params}
        if len(dtypes) != 1:
            raise TypeError("FlatParams: parameters of one dtype only, got "
                            f"{sorted(map(str, dtypes))}")
        modules = {array_module(p.data).__name__ for p in self.params}
        if len(modules) != 1:  # the buffers live in one place: model.to(...) moves them all
            raise TypeError(f"FlatParams: parameters of one array module only, got "
                            f"{sorted(modules)} (move the model with model.to first)")
        self.xp = xp = array_module(self.params[0].data)
        self.offsets = [0]
        for p in self.params:
            self.offsets.append(self.offsets[-1] + p.data.size)
        self.data = xp.empty(self.offsets[-1], dtypes.pop())
        grad = xp.zeros_like(self.data) if grads else None
        views: List[Any] = []
        # None with grads=False, where nothing calls adopt_grad or zero_grad (stages 2-3)
        self.grad: Any = grad
        self.grad_views: Any = views if grads else None
        for i, p in enumerate(self.params):
            start, stop = self.range(i)
            self.data[start:stop] = p.data.ravel()
            p.data = self.data[start:stop].reshape(p.data.shape)
            if grad is None:
                p.grad = None
                continue
            view = grad[start:stop].reshape(p.data.shape)
            if p.grad is not None:
                view[...] = p.grad
            p.grad = view
            views.append(view)

    @property
    def count(self) -> int:
        return self.offsets[-1]

    @property
    def dtype(self) -> Any:
        return self.params[0].data.dtype

    def range(self, i: int) -> Tuple[int, int]:
        """(start, stop) of parameter i in the flat buffers."""
        return self.offsets[i], self.offsets[i + 1]

    def shard(self, rank: int, size: int) -> Tuple[int, int]:
        """(start, stop) of rank's shard of the flat buffers (ZeRO)."""
        return shard_range(self.count, size, rank)

    def span(self, indices: Sequence[int]) -> Tuple[int, int]:
        """(start, stop) of a run of consecutive parameters (a bucket or unit, in any order)."""
        return self.offsets[min(indices)], self.offsets[max(indices) + 1]

    def adopt_grad(self, i: int) -> None:
        """Make parameter i's .grad the view again if something replaced it (zero_grad with
        set_to_none, or a backward that found no gradient and made a fresh array)."""
        p, view = self.params[i], self.grad_views[i]
        if p.grad is not view:
            view[...] = 0 if p.grad is None else p.grad
            p.grad = view

    def zero_grad(self) -> None:
        self.grad[...] = 0
        for i in range(len(self.params)):
            self.params[i].grad = self.grad_views[i]

    def as_tensor(self, start: int = 0, stop: Optional[int] = None) -> Tensor:
        """One tensor over [start, stop) of both buffers: what an optimizer updates."""
        t = Tensor(self.data[start:stop])
        t.grad = self.grad[start:stop] if self.grad is not None else None
        return t
