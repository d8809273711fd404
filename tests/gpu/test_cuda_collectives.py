"""The collectives on CuPy arrays, on a GPU: the script CI runs on the CPU emulation
(tests/test_device_collectives.py), here with DEVICE=cupy, at 1, 2 and 4 ranks on the GPUs
present (ranks share a GPU where there are fewer). Needs CuPy and a GPU; elsewhere it skips
(tests/gpu/device_check.sh runs it on a lent machine)."""
import pytest

import dpcore
from mpi_helpers import run_ok

pytest.importorskip("cupy")
pytestmark = [pytest.mark.gpu, pytest.mark.mpi,
              pytest.mark.skipif(not dpcore.build_info()["cuda_available"],
                                 reason="needs a CUDA build and a GPU")]


@pytest.mark.parametrize("n, mode", [(1, "few"), (2, "all"), (4, "few")])
def test_collectives_on_cupy_arrays(n, mode):
    output = run_ok("device_collectives.py", n, mode, env={"DEVICE": "cupy"}, timeout=300)
    assert output.count("device cuda:") == n


def test_direct_on_cupy_buffers_every_peer_maps():
    run_ok("device_direct.py", 2, env={"DEVICE": "cupy"}, timeout=300)
