"""The dtypes, ops, collectives and algorithms dpcore knows, with the codes dpcore._C gives them
(csrc/include/dpcore/types.h is the one place that numbers them)."""
import numpy as np

from . import _C

# dtype -> code, NumPy's own dtypes at first. bfloat16's NumPy dtype comes from ml_dtypes
# (optional), whose import took about a second here: every rank of every job paid it in
# `import dpcore`. So it is looked up where a bfloat16 array or name first appears
# (bfloat16_dtype), and only then entered here.
DTYPES = {np.dtype(name): code for name, code in _C.DTYPES.items() if name != "bfloat16"}
BFLOAT16_CODE = _C.DTYPES["bfloat16"]

FLOATING = {code for dt, code in DTYPES.items() if dt.kind == "f"} | {BFLOAT16_CODE}
# The dtypes dpcore reduces; the others (bool, int16, uint16, complex64) only move: broadcast,
# all_gather, gather, scatter, all_to_all, send and recv take them in their own dtype.
REDUCED = set(_C.REDUCED_DTYPES.values())

OPS = dict(_C.OPS)  # {"sum": 0, ...}
AVG = OPS["avg"]

COLLECTIVES = dict(_C.COLLECTIVES)  # {"barrier": 0, ...}, in code order (coll_table.h's rows)
(BARRIER, ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, REDUCE, GATHER, SCATTER,
 ALL_TO_ALL) = COLLECTIVES.values()

ALGORITHMS = dict(_C.ALGORITHMS)  # {"one_shot": 0, "ring": 1, ..., "auto": 4}
ALGORITHM_NAMES = {code: name for name, code in ALGORITHMS.items()}


def bfloat16_dtype():
    """NumPy's bfloat16 (ml_dtypes'), entered in DTYPES; None where ml_dtypes is missing."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    dtype = np.dtype(ml_dtypes.bfloat16)
    DTYPES[dtype] = BFLOAT16_CODE
    return dtype


def supported(moved=False):
    """Every dtype dpcore reduces here, in code order (bfloat16 with ml_dtypes); moved: and
    those it only moves."""
    bfloat16_dtype()
    return sorted((d for d, code in DTYPES.items() if moved or code in REDUCED), key=DTYPES.get)


def dtype_code(dtype):
    """The code of a supported dtype; TypeError names the supported ones otherwise."""
    code = DTYPES.get(dtype)
    if code is None and getattr(dtype, "name", None) == "bfloat16" and bfloat16_dtype() == dtype:
        code = BFLOAT16_CODE  # the first bfloat16 array: ml_dtypes is imported by now
    if code is None:
        raise TypeError(f"dpcore: unsupported dtype {dtype}; supported: {_supported_names()}")
    return code


def _supported_names():
    """"float16, ..., uint64; moved only: bool, ...", for messages."""
    moved = ", ".join(str(d) for d in supported(moved=True) if DTYPES[d] not in REDUCED)
    return ", ".join(str(d) for d in supported()) + "; moved only: " + moved


def parse_dtype(name):
    """A dtype from its name ("float32", "bfloat16", ...), for the command line."""
    if name == "bfloat16":
        dtype = bfloat16_dtype()
        if dtype is None:
            raise ValueError("bfloat16 needs ml_dtypes (pip install ml_dtypes)")
        return dtype
    return np.dtype(name)
