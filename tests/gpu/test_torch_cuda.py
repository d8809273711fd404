"""The torch backend on CUDA tensors, on a GPU (tests/scripts/torch_cuda.py says what it checks):
collectives in float16, bfloat16 and float32, the current stream, and DDP, against gloo in the
same job. Needs torch with CUDA and a CUDA build of dpcore; elsewhere it skips
(tests/gpu/device_check.sh runs it on a lent machine)."""
import pytest

import dpcore
from mpi_helpers import run_ok

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.mpi, pytest.mark.torch,
              pytest.mark.skipif(not (torch.cuda.is_available()
                                      and dpcore.build_info()["cuda_available"]),
                                 reason="needs torch with CUDA, a CUDA build and a GPU")]


def test_torch_collectives_and_ddp_on_cuda_tensors_match_gloo():
    run_ok("torch_cuda.py", 2, timeout=240)
