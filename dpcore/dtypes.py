"""The dtypes, ops, collectives and algorithms dpcore knows, with the codes dpcore._C gives them
(csrc/include/dpcore/types.h is the one place that numbers them)."""
import numpy as np

from . import _C

try:  # bfloat16 is optional: ml_dtypes provides the NumPy dtype
    import ml_dtypes

    bfloat16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    bfloat16 = None

DTYPES = {np.dtype(name): code for name, code in _C.DTYPES.items() if name != "bfloat16"}
if bfloat16 is not None:
    DTYPES[bfloat16] = _C.DTYPES["bfloat16"]

FLOATING = {code for dt, code in DTYPES.items() if dt.kind == "f" or dt == bfloat16}

OPS = dict(_C.OPS)  # {"sum": 0, ...}
AVG = OPS["avg"]

COLLECTIVES = dict(_C.COLLECTIVES)
BARRIER, ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST = (
    COLLECTIVES[name] for name in ("barrier", "all_reduce", "reduce_scatter", "all_gather",
                                   "broadcast"))

ALGORITHMS = dict(_C.ALGORITHMS)  # {"one_shot": 0, "ring": 1, ..., "auto": 4}
ALGORITHM_NAMES = {code: name for name, code in ALGORITHMS.items()}


def dtype_code(dtype):
    """The code of a supported dtype; TypeError names the supported ones otherwise."""
    code = DTYPES.get(dtype)
    if code is None:
        names = ", ".join(sorted(str(d) for d in DTYPES))
        raise TypeError(f"dpcore: unsupported dtype {dtype}; supported: {names}")
    return code


def parse_dtype(name):
    """A dtype from its name ("float32", "bfloat16", ...), for the command line."""
    if name == "bfloat16":
        if bfloat16 is None:
            raise ValueError("bfloat16 needs ml_dtypes (pip install ml_dtypes)")
        return bfloat16
    return np.dtype(name)
