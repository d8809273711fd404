"""Tensor: an array with reverse-mode autograd, micrograd's engine made array-valued.

Each op computes its result and records a backward closure that, given the gradient of the
result, adds the gradients of its inputs. `backward()` runs a closure once every consumer of its
result has run, the latest-created first (PyTorch's engine does the same), so the last layer's
gradients are complete while the earlier layers' backward is still to come. The array is
NumPy or CuPy; `array_module` (devices.py) finds the module from the array, so CuPy is only ever
touched when a CuPy array is already in use.
"""
import heapq
import itertools
import math

import numpy as np

from . import trace
from .devices import array_module, is_cupy

_grad_enabled = True
_created = itertools.count()  # creation order of graph nodes: backward runs the latest first


class no_grad:
    """Ops inside record no graph (evaluation, optimizer updates)."""

    def __enter__(self):
        global _grad_enabled
        self._prev, _grad_enabled = _grad_enabled, False

    def __exit__(self, *exc):
        global _grad_enabled
        _grad_enabled = self._prev


def is_grad_enabled():
    return _grad_enabled


def erf(x):
    """Elementwise erf, exact to float64 (PyTorch's nn.GELU uses the exact erf form): SciPy's,
    cupyx's for CuPy, or the module's own `erf` for any other array module."""
    xp = array_module(x)
    if is_cupy(xp):
        from cupyx.scipy.special import erf as cupy_erf
        return cupy_erf(x)
    if xp is not np:
        return xp.erf(x)
    try:
        from scipy.special import erf as scipy_erf
    except ImportError:  # slow, but exact and dependency-free
        return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)
    return scipy_erf(x)


def _unbroadcast(g, shape):
    """Sum g over the axes that broadcasting added or stretched, so it has `shape` again."""
    if g.shape == shape:
        return g
    if g.ndim > len(shape):
        # an array even where NumPy's sum to shape () gives a scalar, as CuPy's does
        g = array_module(g).asarray(g.sum(axis=tuple(range(g.ndim - len(shape)))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=stretched, keepdims=True) if stretched else g


def _add_at(full, index, g):
    """full[index] += g, correct when the index repeats (embedding rows, cross-entropy picks):
    cupyx.scatter_add for CuPy (whose add.at is recent), the module's add.at otherwise."""
    xp = array_module(full)
    if is_cupy(xp):
        import cupyx
        cupyx.scatter_add(full, index, g)
    else:
        xp.add.at(full, index, g)


class Tensor:
    """An array (NumPy, or CuPy on a GPU) with a gradient: `.data`, `.grad`, `.backward()`, the
    operators + - * / @ and the reductions the layers use, as in PyTorch (docs/api.md,
    "Training")."""

    __array_ufunc__ = None  # so `ndarray op Tensor` calls Tensor's reflected operator

    def __init__(self, data, requires_grad=False):
        if isinstance(data, Tensor):
            data = data.data
        xp = array_module(data)
        self.data = data if isinstance(data, xp.ndarray) else np.asarray(data)
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self.is_leaf = True
        self._prev = ()         # inputs that want a gradient
        self._backward = None   # g -> accumulates into self._prev
        self._hooks = []

    # -- graph plumbing ------------------------------------------------------------------------

    @staticmethod
    def _result(data, parents, backward):
        out = Tensor(data)
        if _grad_enabled and any(p.requires_grad for p in parents):
            out.requires_grad, out.is_leaf = True, False
            out._prev = tuple(p for p in parents if p.requires_grad)
            out._backward = backward
            out._seq = next(_created)
        return out

    def _accumulate(self, g):
        """Add a gradient (an array, or a function that computes it: only called when this tensor
        wants one, so e.g. the input batch's gradient is never computed)."""
        if not self.requires_grad:
            return
        xp = array_module(self.data)
        g = _unbroadcast(xp.asarray(g() if callable(g) else g), self.data.shape)
        if self.grad is None:
            # a leaf keeps its gradient past this backward, so it must own it; an inner node's
            # may alias its sibling's (x + y hands both the same g) since it is never changed
            self.grad = g.astype(self.data.dtype, copy=self.is_leaf)
        elif self.is_leaf:
            self.grad += g  # in place: .grad may be a view into a flat gradient buffer
        else:
            self.grad = self.grad + g

    def _lift(self, other):
        if isinstance(other, Tensor):
            return other
        xp = array_module(self.data)
        if isinstance(other, (int, float)) and self.data.dtype.kind == "f":
            return Tensor(xp.asarray(other, dtype=self.data.dtype))  # keep float32 float32
        return Tensor(xp.asarray(other))

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor) runs when a backward has added its last contribution to this leaf's
        .grad (data parallelism starts a bucket's all-reduce there)."""
        self._hooks.append(hook)

    def topological_order(self):
        """Every tensor this one depends on (that wants a gradient), inputs before results.
        Iterative DFS: deep graphs would overflow Python's recursion limit."""
        order, seen, stack = [], set(), [(self, False)]
        while stack:
            t, finished = stack.pop()
            if finished:
                order.append(t)
            elif id(t) not in seen:
                seen.add(id(t))
                stack.append((t, True))
                stack.extend((p, False) for p in t._prev if id(p) not in seen)
        return order

    def backward(self, grad=None):
        with trace.span("backward"):  # DPCORE_TRACE's training lane
            self._backprop(grad)

    def _backprop(self, grad):
        if not self.requires_grad:
            raise RuntimeError("backward: this tensor does not require grad and has no graph")
        if not self.is_leaf and self._backward is None:
            raise RuntimeError("backward: the graph was freed by an earlier backward()")
        waiting = {}  # tensor id -> how many of its consumers have still to run
        for t in self.topological_order():
            for p in t._prev:
                waiting[id(p)] = waiting.get(id(p), 0) + 1
        xp = array_module(self.data)
        self._accumulate(xp.ones_like(self.data) if grad is None else xp.asarray(grad))
        # Ready nodes, latest-created first. A plain reversed DFS order is also topological,
        # but may put a layer's W.T after every earlier layer, so W's gradient (and the
        # all-reduce of its bucket) would wait for the end of backward.
        ready = [] if self.is_leaf else [(-self._seq, self)]
        while ready:
            _, t = heapq.heappop(ready)
            if t._backward is not None and t.grad is not None:
                t._backward(t.grad)
            for p in t._prev:
                waiting[id(p)] -= 1
                if waiting[id(p)] == 0:
                    if p.is_leaf:
                        p._grad_ready()
                    else:
                        heapq.heappush(ready, (-p._seq, p))
            t.grad, t._prev, t._backward = None, (), None  # free activations, as PyTorch does
        if self.is_leaf:
            self._grad_ready()

    def _grad_ready(self):
        for hook in self._hooks:
            hook(self)

    # -- arithmetic (broadcasting; _accumulate sums gradients back to each input's shape) -------

    def __add__(self, other):
        a, b = self, self._lift(other)

        def backward(g):
            a._accumulate(g)
            b._accumulate(g)
        return Tensor._result(a.data + b.data, (a, b), backward)

    def __mul__(self, other):
        a, b = self, self._lift(other)

        def backward(g):
            a._accumulate(lambda: g * b.data)
            b._accumulate(lambda: g * a.data)
        return Tensor._result(a.data * b.data, (a, b), backward)

    def __truediv__(self, other):
        a, b = self, self._lift(other)

        def backward(g):
            a._accumulate(lambda: g / b.data)
            b._accumulate(lambda: -g * a.data / (b.data * b.data))
        return Tensor._result(a.data / b.data, (a, b), backward)

    def __pow__(self, p):
        assert isinstance(p, (int, float)), "only a constant exponent"
        a = self
        return Tensor._result(a.data ** p, (a,),
                              lambda g: a._accumulate(lambda: g * p * a.data ** (p - 1)))

    def __matmul__(self, other):
        a, b = self, self._lift(other)
        if a.ndim == 1:  # a vector is a 1-row matrix whose row axis then goes away
            out = a.reshape(1, -1) @ b
            return out.reshape(out.shape[:-2] + out.shape[-1:])
        if b.ndim == 1:
            return (a @ b.reshape(-1, 1)).reshape(a.shape[:-1])

        def grad_b(g):
            if a.ndim == 2 and b.ndim == 2 and not b.data.flags.c_contiguous:
                # b is a transposed view (x @ W.T): give its gradient the same layout, so that
                # it lands in W's gradient as a plain add instead of a cache-hostile transpose
                return (g.T @ a.data).T
            return a.data.swapaxes(-1, -2) @ g  # batch axes then summed by _unbroadcast

        def backward(g):
            a._accumulate(lambda: g @ b.data.swapaxes(-1, -2))
            b._accumulate(lambda: grad_b(g))
        return Tensor._result(a.data @ b.data, (a, b), backward)

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-self._lift(other))

    def __radd__(self, other):
        return self + other

    def __rsub__(self, other):
        return self._lift(other) - self

    def __rmul__(self, other):
        return self * other

    def __rtruediv__(self, other):
        return self._lift(other) / self

    def __rmatmul__(self, other):
        return self._lift(other) @ self

    # -- reductions and shape -------------------------------------------------------------------

    def sum(self, axis=None, keepdims=False):
        a, xp = self, array_module(self.data)

        def backward(g):
            if axis is not None and not keepdims:
                g = xp.expand_dims(g, axis)
            a._accumulate(xp.broadcast_to(g, a.shape))
        return Tensor._result(xp.asarray(a.data.sum(axis=axis, keepdims=keepdims)), (a,),
                              backward)

    def mean(self, axis=None, keepdims=False):
        s = self.sum(axis=axis, keepdims=keepdims)
        count = self.data.size // s.data.size if s.data.size else 1
        return s / count  # an empty mean is nan, as in NumPy and PyTorch

    def reshape(self, *shape):
        a = self
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return Tensor._result(a.data.reshape(shape), (a,),
                              lambda g: a._accumulate(g.reshape(a.shape)))

    def transpose(self, *axes):
        a = self
        axes = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        axes = tuple(ax % a.ndim for ax in axes) or tuple(reversed(range(a.ndim)))
        inverse = tuple(np.argsort(axes))
        return Tensor._result(a.data.transpose(axes), (a,),
                              lambda g: a._accumulate(g.transpose(inverse)))

    @property
    def T(self):
        return self.transpose()

    def __getitem__(self, index):
        a, xp = self, array_module(self.data)
        if isinstance(index, tuple):
            index = tuple(i.data if isinstance(i, Tensor) else i for i in index)
        elif isinstance(index, Tensor):
            index = index.data

        def scatter(g):
            full = xp.zeros_like(a.data)
            _add_at(full, index, g)
            return full
        return Tensor._result(a.data[index], (a,),
                              lambda g: a._accumulate(lambda: scatter(g)))

    # -- elementwise functions ------------------------------------------------------------------

    def _unary(self, y, dy):
        """y = f(self); dy() gives f'(self), computed only during backward."""
        a = self
        return Tensor._result(y, (a,), lambda g: a._accumulate(lambda: g * dy()))

    def relu(self):
        x = self.data
        return self._unary(array_module(x).maximum(x, 0), lambda: x > 0)

    def tanh(self):
        y = array_module(self.data).tanh(self.data)
        return self._unary(y, lambda: 1 - y * y)

    def exp(self):
        y = array_module(self.data).exp(self.data)
        return self._unary(y, lambda: y)

    def log(self):
        x = self.data
        return self._unary(array_module(x).log(x), lambda: 1 / x)

    def gelu(self, approximate="none"):
        """x * Phi(x): exact (erf) like PyTorch's default, or its "tanh" approximation."""
        x, xp = self.data, array_module(self.data)
        if approximate == "tanh":
            k, c = math.sqrt(2 / math.pi), 0.044715
            t = xp.tanh(k * (x + c * x ** 3))
            dt = lambda: (1 - t * t) * k * (1 + 3 * c * x * x)  # noqa: E731  d tanh(...)/dx
            return self._unary(0.5 * x * (1 + t), lambda: 0.5 * (1 + t) + 0.5 * x * dt())
        cdf = 0.5 * (1 + erf(x / math.sqrt(2)))
        pdf = lambda: xp.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)  # noqa: E731
        return self._unary(x * cdf, lambda: cdf + x * pdf())

    # -- the rest -------------------------------------------------------------------------------

    @property
    def shape(self):
        return self.data.shape

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def size(self):
        return self.data.size

    def __len__(self):
        return len(self.data)

    def item(self):
        return self.data.item()

    def numpy(self):
        return self.data if array_module(self.data) is np else self.data.get()

    def before_backward(self, hook):
        """This tensor through an identity node whose backward calls hook() before the gradient
        flows on (ZeRO-3 gathers a module's parameters there); itself where no graph is made."""
        if not (self.requires_grad and _grad_enabled):
            return self

        def backward(g):
            hook()
            self._accumulate(g)
        return Tensor._result(self.data, (self,), backward)

    def detach(self):
        return Tensor(self.data)

    def __repr__(self):
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor({self.data!r}{grad})"
