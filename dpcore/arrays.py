"""The arrays dpcore's calls take, as types (for annotations; nothing here runs a check).

A collective takes a NumPy array, anything a CPU DLPack export reaches (a torch CPU tensor), or a
CUDA array (CuPy, a torch CUDA tensor, anything with __cuda_array_interface__); what it returns
is of the caller's type, which `A` says. The Communicator's checks decide at run time what is
taken (docs/api.md); these say only what kinds of object may be offered.
"""
from typing import Any, Dict, Protocol, Tuple, TypeVar, Union

import numpy.typing as npt


class DLPackArray(Protocol):
    """An array that exports itself through DLPack (torch tensors, JAX arrays)."""

    def __dlpack__(self) -> Any: ...

    def __dlpack_device__(self) -> Tuple[int, int]: ...


class CudaArray(Protocol):
    """An array that describes its CUDA memory (CuPy arrays, torch CUDA tensors, Numba's)."""

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...


Array = Union[npt.NDArray[Any], DLPackArray, CudaArray]

# A collective's result is of its input's type: `A` in, `A` out
A = TypeVar("A", bound=Array)
