"""dpcore: from-scratch collectives for data-parallel training (see docs/api.md)."""
from . import _C
from .comm import Communicator, init
from .sharding import shard_range
from .tensor import Tensor, no_grad
from .work import Work
from . import nn, optim, parallel  # noqa: E402  (they import Tensor from this package)

__version__ = "0.1.0"

CommError = _C.CommError
CommError.__module__ = "dpcore"


def build_info():
    """What this build can do: {"cuda", "cuda_archs", "cuda_available", "version"}."""
    info = dict(_C.build_info())
    info["version"] = __version__
    return info


__all__ = ["CommError", "Communicator", "Tensor", "Work", "build_info", "init", "nn", "no_grad",
           "optim", "parallel", "shard_range"]
