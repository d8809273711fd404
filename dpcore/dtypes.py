"""The dtypes and ops dpcore reduces, as the codes csrc/include/dpcore/types.h defines."""
import numpy as np

try:  # bfloat16 is optional: ml_dtypes provides the NumPy dtype
    import ml_dtypes

    bfloat16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    bfloat16 = None

DTYPES = {
    np.dtype(np.float16): 0,
    np.dtype(np.float32): 2,
    np.dtype(np.float64): 3,
    np.dtype(np.int8): 4,
    np.dtype(np.uint8): 5,
    np.dtype(np.int32): 6,
    np.dtype(np.int64): 7,
}
if bfloat16 is not None:
    DTYPES[bfloat16] = 1

FLOATING = {code for dt, code in DTYPES.items() if dt.kind == "f" or dt == bfloat16}

OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
AVG = OPS["avg"]

# Collectives, as csrc's Coll enum.
BARRIER, ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST = range(5)


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
