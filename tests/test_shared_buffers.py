"""comm.alloc: buffers every rank of a node maps, which direct reads with one plain copy
(csrc/cpu/shared_buffers.h). Correct against MPI on 1-4 ranks, mixed with ordinary arrays and
after one rank frees its buffer, and picked for by rank 0 under DPCORE_TUNE=0's fixed choice; the
autouse fixture checks that no segment outlives the job."""
import pytest

from mpi_helpers import run_ok

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_collectives_on_shared_buffers_match_mpi(n):
    run_ok("shared_buffers.py", n, timeout=240)  # every rank reports ok, or the test fails


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_fixed_choice_follows_rank_0s_buffers(n):
    """DPCORE_TUNE=0: all_gather on comm.alloc buffers runs direct, on ordinary ones the ring,
    and a rank whose buffer differs from rank 0's runs rank 0's pick."""
    run_ok("fixed_choice.py", n, env={"DPCORE_TUNE": "0"})
