"""CPU torch tensors go in through DLPack and come back as torch tensors, without copies of
the caller's buffers (out=t and broadcast write into t's own storage)."""
import pytest

import dpcore
from mpi_helpers import run_ok

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 3])
def test_torch_tensors_every_dtype(n):
    run_ok("torch_dlpack.py", n)


@pytest.mark.mpi
def test_torch_bfloat16_tensors():
    """bfloat16 is the dtype trainers reduce gradients in; API.md promises it where ml_dtypes is
    installed, and torch exports it through DLPack."""
    pytest.importorskip("ml_dtypes")
    run_ok("torch_dlpack.py", 2, "bfloat16")


def test_a_torch_user_hears_what_to_do_in_torch():
    """A strided view, or a tensor that requires grad, is refused with torch's remedy."""
    with dpcore.init() as comm:
        with pytest.raises(ValueError, match=r"x must be C-contiguous \(use x.contiguous\(\)\)"):
            comm.all_reduce(torch.ones(4, 4).t())
        with pytest.raises(TypeError, match=r"x requires grad; pass x.detach\(\)"):
            comm.all_reduce(torch.ones(3, requires_grad=True))
        assert torch.equal(comm.all_reduce(torch.arange(8.0)[2:6]), torch.arange(2.0, 6.0))
