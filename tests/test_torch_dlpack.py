"""CPU torch tensors go in through DLPack and come back as torch tensors, without copies of
the caller's buffers (out=t and broadcast write into t's own storage)."""
import pytest

from mpi_helpers import run_ok

pytestmark = pytest.mark.mpi
pytest.importorskip("torch")


@pytest.mark.parametrize("n", [2, 3])
def test_torch_tensors_every_dtype(n):
    run_ok("torch_dlpack.py", n)


def test_torch_bfloat16_tensors():
    """bfloat16 is the dtype trainers reduce gradients in; API.md promises it where ml_dtypes is
    installed, and torch exports it through DLPack."""
    pytest.importorskip("ml_dtypes")
    run_ok("torch_dlpack.py", 2, "bfloat16")
