"""comm.alloc: buffers every rank of a node maps, which direct reads with one plain copy
(csrc/cpu/shared_buffers.h). Correct against MPI on 1-4 ranks, mixed with ordinary arrays and
after one rank frees its buffer; the autouse fixture checks that no segment outlives the job."""
import pytest

from mpi_helpers import run_ok


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_collectives_on_shared_buffers_match_mpi(n):
    run_ok("shared_buffers.py", n, timeout=240)  # every rank reports ok, or the test fails
