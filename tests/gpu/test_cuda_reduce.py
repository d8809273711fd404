"""The CUDA reduce kernel against CuPy, for every dtype x op. Runs where a GPU and CuPy are;
elsewhere it skips (CI has no GPU: tests/gpu/device_check.sh runs it on a lent machine)."""
import numpy as np
import pytest

import dpcore
from dpcore import _C
from dpcore.dtypes import DTYPES, OPS, bfloat16_dtype

bfloat16 = bfloat16_dtype()

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
if not dpcore.build_info()["cuda_available"]:
    pytest.skip("no usable GPU in this build or machine", allow_module_level=True)

DTYPE_LIST = [d for d in DTYPES if d != bfloat16]  # CuPy has no bfloat16 arithmetic
REFERENCE = {"sum": lambda a, b: a + b, "prod": lambda a, b: a * b,
             "max": lambda a, b: np.maximum(a, b), "min": lambda a, b: np.minimum(a, b)}


def cuda_reduce(a, b, out, op, divisor=0):
    _C.cuda_reduce(DTYPES[a.dtype], OPS[op], a.data.ptr, b.data.ptr, out.data.ptr, a.size,
                   divisor, cp.cuda.get_current_stream().ptr)


@pytest.mark.parametrize("dtype", DTYPE_LIST, ids=str)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("count", [0, 1, 1000003])
def test_matches_numpy(dtype, op, count):
    rng = np.random.default_rng(count)
    # Small integers: every result is exact in every dtype, so equality is the check.
    lo, hi = (0, 4) if dtype == np.uint8 or op == "prod" else (-8, 8)
    a = rng.integers(lo, hi, count).astype(dtype)
    b = rng.integers(lo, hi, count).astype(dtype)
    out = cp.empty(count, dtype)
    cuda_reduce(cp.asarray(a), cp.asarray(b), out, op)
    np.testing.assert_array_equal(cp.asnumpy(out), REFERENCE[op](a, b).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=str)
def test_avg_divides_like_numpy(dtype):
    a = np.arange(10001).astype(dtype)
    b = (np.arange(10001) % 7).astype(dtype)
    out = cp.empty_like(cp.asarray(a))
    cuda_reduce(cp.asarray(a), cp.asarray(b), out, "avg", divisor=3)
    expected = ((a.astype(np.float32 if dtype == np.float16 else dtype) + b) / 3).astype(dtype)
    np.testing.assert_array_equal(cp.asnumpy(out), expected)
