"""Bad local input (non-contiguous, unsupported dtype, wrong or read-only out, bad op, avg on
integers, bad root, bad algo name) raises TypeError/ValueError on that rank alone, before anything
is sent: the script makes one rank at a time call wrongly and then runs a correct all_reduce on
every rank, which would fail or hang had the bad call reached the peers."""
import pytest

from mpi_helpers import run_ok

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [1, 2, 3])
def test_bad_input_is_refused_locally_and_the_communicator_stays_usable(n):
    run_ok("bad_input.py", n)
