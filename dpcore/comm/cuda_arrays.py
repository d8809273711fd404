"""CUDA arrays as the device path sees them: a pointer, a dtype, a shape, and the library's way to
make another one and to name its current stream. CuPy arrays, torch CUDA tensors and any array
with `__cuda_array_interface__` (or a CUDA DLPack export, through CuPy) are taken without a copy;
dpcore.emulated's arrays stand in for them where there is no GPU."""
import sys

import numpy as np

from ..dtypes import bfloat16_dtype

_KDL_CUDA, _KDL_CUDA_MANAGED = 2, 13


class DeviceArray:
    """The memory of one CUDA array: data pointer, dtype, shape, the array that exposes them
    (array) and the caller's own (user: the same, or what CuPy took through DLPack)."""

    __slots__ = ("array", "user", "ptr", "dtype", "shape", "size", "nbytes", "readonly",
                 "contiguous")

    def __init__(self, array, interface, user=None):
        self.array = array
        self.user = array if user is None else user
        self.ptr, self.readonly = interface["data"]
        self.shape = tuple(interface["shape"])
        self.dtype = _dtype_of(array, interface["typestr"])
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.nbytes = self.size * self.dtype.itemsize
        strides = interface.get("strides")
        self.contiguous = strides is None or self.size <= 1 or tuple(strides) == _c_strides(
            self.shape, self.dtype.itemsize)


# torch's dtypes by name, as NumPy knows them: torch spells bfloat16 "<V2" in the interface
_TORCH_DTYPES = {name: np.dtype(name) for name in
                 ("float16", "float32", "float64", "int8", "uint8", "int32", "uint32", "int64",
                  "uint64")}


def _dtype_of(array, typestr):
    """The array's own NumPy dtype where it has one (CuPy, dpcore.emulated), torch's mapped by
    name, else the interface's typestr; one that says only "so many bytes" is refused."""
    dtype = getattr(array, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype
    name = str(dtype).rpartition(".")[2] if dtype is not None else ""
    if name == "bfloat16":
        found = bfloat16_dtype()
        if found is None:
            raise TypeError("dpcore: bfloat16 CUDA arrays need ml_dtypes (pip install ml_dtypes)")
        return found
    if name in _TORCH_DTYPES:
        return _TORCH_DTYPES[name]
    found = np.dtype(typestr)
    if found.kind == "V":
        raise TypeError(f"dpcore: a CUDA array of dtype {dtype} (typestr {typestr!r}) is not one "
                        f"dpcore knows")
    return found


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def device_view(x, what="x"):
    """A DeviceArray of x if it lives on a CUDA device, else None (then it is a host array)."""
    if isinstance(x, np.ndarray):
        return None
    try:
        interface = x.__cuda_array_interface__
    except AttributeError:  # a host array (a torch CPU tensor raises it too)
        interface = None
    except RuntimeError as e:  # torch: a tensor that requires grad
        raise TypeError(f"dpcore: {what}: {e}; pass {what}.detach()") from None
    if interface is None:
        device = getattr(x, "__dlpack_device__", None)
        if device is None or device()[0] not in (_KDL_CUDA, _KDL_CUDA_MANAGED):
            return None
        view = _cupy(what).from_dlpack(x)  # a CuPy view, no copy
        return DeviceArray(view, view.__cuda_array_interface__, x)
    return DeviceArray(x, interface)


def _cupy(what):
    try:
        import cupy
    except ImportError:
        raise TypeError(f"dpcore: {what} is a CUDA array without __cuda_array_interface__; "
                        f"dpcore takes it through CuPy, which is not installed "
                        f"(pip install cupy-cuda13x)") from None
    return cupy


def _library(array):
    return sys.modules.get(type(array).__module__.split(".")[0])


def empty_like(view, shape, dtype=None):
    """A new array on view's device, of view's library: its result or staging."""
    array, dtype = view.array, view.dtype if dtype is None else dtype
    new_empty = getattr(array, "new_empty", None)  # torch, dpcore.emulated
    if new_empty is not None:
        return new_empty(shape)
    library = _library(array)
    if library is not None and library.__name__ == "cupy":
        with array.device:
            return library.empty(shape, dtype)
    namespace = getattr(array, "__array_namespace__", None)  # the Array API's way
    if namespace is not None:
        return namespace().empty(shape, dtype=dtype)
    raise TypeError(f"dpcore: cannot make a {type(array).__name__} for the result; pass out=")


def stream_of(view):
    """The caller's current stream on view's device (a cudaStream_t as an int): the collective
    runs after the work queued there before the call."""
    array = view.array
    library = _library(array)
    name = library.__name__ if library is not None else ""
    if name == "cupy":  # the current stream of the array's device, not of the current device
        with array.device:
            return library.cuda.get_current_stream().ptr
    if name == "torch":
        return library.cuda.current_stream(array.device).cuda_stream
    stream = array.__cuda_array_interface__.get("stream")  # version 3: the producer's
    return 0 if stream in (None, 1) else int(stream)  # 1: the legacy default stream, 0 here


def device_index(view):
    """The CUDA device the array lives on."""
    device = getattr(view.array, "device", None)
    for index in (getattr(device, "id", None), getattr(device, "index", None)):  # CuPy, torch
        if isinstance(index, int):
            return index
    return 0  # one device (the emulation), or a library that does not say
