"""The plain call (dpcore/comm/plain.py, csrc/bind_plain.cc): a user's loop's call, checked and
run in one compiled step, takes no call that the full checks refuse, and runs the calls it takes
exactly (scripts/plain_calls.py says what it tries)."""
import pytest

from mpi_helpers import run_ok


@pytest.mark.mpi
def test_the_plain_call_takes_only_what_the_full_checks_take():
    run_ok("plain_calls.py", 2, timeout=120)
