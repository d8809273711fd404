"""strict_xp: a stand-in for CuPy where there is no GPU, for tests only. Its arrays hold NumPy
arrays and compute with NumPy, but, as CuPy's do, they refuse to become NumPy arrays unasked:
np.asarray(x), np.array(x) and a NumPy array as an operand or as a value stored into one raise
TypeError. It is stricter than CuPy in one way: any NumPy function or ufunc called on one
(np.exp(x), np.concatenate([x])) raises too, where CuPy would dispatch it to itself; the trainer
must use the array's own module (dpcore.tensor.array_module), which for these arrays is this
module. So a code path that works on NumPy arrays only fails here as it would on a GPU.

What CuPy allows and so does this: the module's asarray/array take host data (a copy, as CuPy
copies to the device), .get() gives a NumPy copy back, NumPy integer arrays may index, NumPy and
Python scalars mix freely, reductions return 0-d arrays, and a view's .base is the array that
owns the memory. Collectives see these arrays through DLPack as CPU arrays (arrays.py), so no
test helper converts them: the communicator is the one place that reads their memory as NumPy.
"""
import os
import sys
import types
import weakref

import numpy as np

_roots = weakref.WeakValueDictionary()  # id of a NumPy array owning memory -> its ndarray here


def _refuse(what):
    raise TypeError(f"strict_xp: {what} (a GPU array cannot be; use .get() or strict_xp.asarray)")


def _owner(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _wrap(r):
    """A NumPy result as this module's array: a view's base is the array owning its memory."""
    if isinstance(r, np.generic):
        r = np.asarray(r)  # reductions and scalar indexing give 0-d arrays, as in CuPy
    if isinstance(r, tuple):
        return tuple(_wrap(x) for x in r)
    if isinstance(r, list):
        return [_wrap(x) for x in r]
    if not isinstance(r, np.ndarray):
        return r
    owner = _owner(r)
    root = _roots.get(id(owner))
    if root is None or root._a is not owner:
        root = ndarray(owner)
        _roots[id(owner)] = root
    return root if owner is r else ndarray(r, base=root)


def _unwrap(x, numpy_ok=False):
    """The NumPy data under x (also inside lists and tuples); a NumPy array is refused unless
    numpy_ok (an index, or host data that asarray copies)."""
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, np.ndarray):
        if not numpy_ok:
            _refuse(f"a NumPy array {x.shape} met a device array")
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, numpy_ok) for v in x)
    return x


class _Flags:
    """CuPy's flags: c_contiguous, f_contiguous, owndata (no writeable)."""

    def __init__(self, a):
        self.c_contiguous = a.flags.c_contiguous
        self.f_contiguous = a.flags.f_contiguous
        self.owndata = a.flags.owndata


class ndarray:  # noqa: N801  (named as cupy.ndarray)
    __slots__ = ("_a", "base", "__weakref__")
    __array_ufunc__ = None  # np.exp(x) raises; `numpy_array + x` falls back to __radd__, refused
    __hash__ = None

    def __init__(self, a, base=None):
        self._a, self.base = a, base

    # -- what CuPy refuses ------------------------------------------------------------------
    def __array__(self, *args, **kwargs):
        _refuse("implicit conversion to a NumPy array")

    def __array_function__(self, func, types, args, kwargs):
        _refuse(f"numpy.{func.__name__} called on a device array")

    # -- the way out and the namespace ------------------------------------------------------
    def get(self):
        return self._a.copy()

    def __array_namespace__(self, api_version=None):
        return sys.modules[__name__]

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    @property
    def __cuda_array_interface__(self):
        """Under DPCORE_CUDA_EMULATION=1 host memory passes for device memory: the collectives
        then take these arrays through the device transport (its CPU emulation), as they take
        CuPy's on a GPU. Elsewhere there is none, and they go as CPU arrays (DLPack)."""
        if os.environ.get("DPCORE_CUDA_EMULATION") != "1":
            raise AttributeError("__cuda_array_interface__")
        return self._a.__array_interface__

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

    # -- attributes ---------------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(self._a))
    T = property(lambda self: _wrap(self._a.T))

    def __getattr__(self, name):  # methods: reshape, sum, astype, copy, ...
        if name.startswith("__"):  # __array_interface__, __array_struct__: NumPy's ways in
            raise AttributeError(f"strict_xp.ndarray has no attribute {name!r}")
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)

        def method(*args, **kwargs):
            return _wrap(attr(*_unwrap(args), **_unwrap_kwargs(kwargs)))
        return method

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key, numpy_ok=True)])

    def __setitem__(self, key, value):
        self._a[_unwrap(key, numpy_ok=True)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        return bool(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __repr__(self):
        return "strict_xp." + repr(self._a)


def _unwrap_kwargs(kwargs):
    return {k: _unwrap(v) for k, v in kwargs.items()}


def _operator(name):
    def op(self, other):
        result = getattr(self._a, name)(_unwrap(other))
        if result is NotImplemented:
            return result
        return self if result is self._a else _wrap(result)  # in place (+=) keeps the object
    op.__name__ = name
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
              "xor"):
    for _form in ("__{}__", "__r{}__", "__i{}__"):
        setattr(ndarray, _form.format(_name), _operator(_form.format(_name)))
for _name in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    setattr(ndarray, _name, _operator(_name))
for _name in ("__neg__", "__pos__", "__abs__", "__invert__"):
    setattr(ndarray, _name, lambda self, _n=_name: _wrap(getattr(self._a, _n)()))


# -- the module's functions: NumPy's, on the data underneath ------------------------------------

class _Wrapped:
    """A NumPy function, ufunc or submodule, taking and giving this module's arrays (a ufunc's
    methods too: add.at)."""

    def __init__(self, target):
        self._target = target

    def __call__(self, *args, **kwargs):
        return _wrap(self._target(*_unwrap(args), **_unwrap_kwargs(kwargs)))

    def __getattr__(self, name):
        return _attribute(getattr(self._target, name))


def _attribute(attr):
    if isinstance(attr, type) or not (callable(attr) or isinstance(attr, types.ModuleType)):
        return attr  # dtypes (float32), constants (pi, newaxis)
    return _Wrapped(attr)


def __getattr__(name):
    return _attribute(getattr(np, name))


def asarray(x, dtype=None):
    """x as this module's array: itself if it is one (of that dtype), else a copy (host data)."""
    if isinstance(x, ndarray):
        return x if dtype is None or x.dtype == np.dtype(dtype) else x.astype(dtype)
    return _wrap(np.array(_unwrap(x, numpy_ok=True), dtype=dtype, copy=True))


def array(x, dtype=None, copy=True):
    return _wrap(np.array(_unwrap(x, numpy_ok=True), dtype=dtype, copy=copy))


def asnumpy(x):
    return x.get() if isinstance(x, ndarray) else np.asarray(x)


def from_dlpack(x):
    """What the communicator wraps a result in for a caller that passed these arrays."""
    return _wrap(np.from_dlpack(x))


def erf(x):
    """cupyx.scipy.special.erf's stand-in (dpcore.tensor.erf looks for the module's own)."""
    from dpcore.tensor import erf as numpy_erf
    return _wrap(numpy_erf(x._a))


class _Add(_Wrapped):
    def at(self, a, index, b):  # an index may be NumPy's, as cupyx.scatter_add allows
        np.add.at(a._a, _unwrap(index, numpy_ok=True), _unwrap(b))


add = _Add(np.add)
random = _Wrapped(np.random)
