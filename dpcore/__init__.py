"""dpcore: from-scratch collectives for data-parallel training (see docs/api.md).

The collectives load with the package; the trainer (Tensor, nn, optim, parallel) and the cost
model load on first use."""
from typing import TYPE_CHECKING, Any, Dict

from . import _C
from ._lazy import exports
from .comm import Communicator, Work, init
from .comm.p2p import P2POp
from .sharding import shard_range

__version__ = "0.1.0"

CommError = _C.CommError
CommError.__module__ = "dpcore"

if TYPE_CHECKING:  # what a type checker sees of the names loaded on first use
    from . import nn, optim, parallel
    from .tensor import Tensor, no_grad

__getattr__ = exports(__name__, {
    "Tensor": ".tensor:Tensor", "no_grad": ".tensor:no_grad",
    "nn": ".nn", "optim": ".optim", "parallel": ".parallel"})


def build_info() -> Dict[str, Any]:
    """What this build can do: {"cuda", "cuda_archs", "cuda_available", "native" (the CPU
    tuning flags, "-march=native", or "" for a portable build), "version"}."""
    info = dict(_C.build_info())
    info["version"] = __version__
    return info


__all__ = ["CommError", "Communicator", "P2POp", "Tensor", "Work", "build_info", "init", "nn",
           "no_grad", "optim", "parallel", "shard_range"]
