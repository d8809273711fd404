"""How the device path reads a CUDA array's dtype (dpcore/comm/cuda_arrays.py): torch spells
bfloat16 "<V2" in `__cuda_array_interface__`, so its dtypes are mapped by name, and a typestr
that says only "so many bytes" is refused rather than taken as raw bytes."""
import numpy as np
import pytest

from dpcore.comm.cuda_arrays import device_view


class TorchLikeDtype:
    """What torch.bfloat16 shows of itself: str() is "torch.bfloat16"."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class TorchLikeTensor:
    """A CUDA tensor as torch exposes one: the interface, and a dtype that is not NumPy's."""

    def __init__(self, typestr, dtype):
        self.dtype = TorchLikeDtype(dtype)
        self.__cuda_array_interface__ = {"version": 3, "shape": (4,), "typestr": typestr,
                                         "data": (4096, False), "strides": None, "stream": 1}


def test_torch_bfloat16_is_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    view = device_view(TorchLikeTensor("<V2", "bfloat16"))
    assert view.dtype == np.dtype(ml_dtypes.bfloat16)
    assert view.nbytes == 8


@pytest.mark.parametrize("typestr, name", [("<f2", "float16"), ("<f4", "float32"),
                                           ("|i1", "int8"), ("<i8", "int64")])
def test_torch_dtypes_are_mapped_by_name(typestr, name):
    assert device_view(TorchLikeTensor(typestr, name)).dtype == np.dtype(name)


def test_a_dtype_known_only_by_its_size_is_refused():
    with pytest.raises(TypeError, match="not one dpcore knows"):
        device_view(TorchLikeTensor("<V2", "complex32"))
