"""Shared fixtures. The multi-rank launch helpers live in mpi_helpers.py."""
import time
from pathlib import Path

import pytest

import mpi_helpers
from array_modules import module_or_skip

SHM = Path("/dev/shm")


def dpcore_segments():
    return {p.name for p in SHM.glob("dpcore-*")} if SHM.is_dir() else set()


@pytest.fixture(autouse=True)
def no_dpcore_shm_leak():
    """Every test must leave no /dev/shm/dpcore-* segment behind, however its ranks ended
    (dpcore unlinks a segment as soon as every rank has mapped it)."""
    before = dpcore_segments()
    yield
    deadline = time.monotonic() + 3  # a concurrent run may hold a segment for a moment
    while (leaked := dpcore_segments() - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not leaked, f"shared memory left behind in /dev/shm: {sorted(leaked)}"


@pytest.fixture(autouse=True)
def mpi_marked(request):
    """Tells run_mpi whether this test is marked mpi: it fails one that launches mpiexec
    without the mark."""
    mpi_helpers.current_test_marked_mpi = request.node.get_closest_marker("mpi") is not None
    yield
    mpi_helpers.current_test_marked_mpi = None


@pytest.fixture(params=["numpy", "strict", pytest.param("cupy", marks=pytest.mark.gpu)])
def xp(request):
    """The array module a trainer test runs on (array_modules.py): numpy; strict_xp, which fails
    where NumPy-only code would fail on a GPU; cupy, skipped where no GPU is usable."""
    return module_or_skip(request.param)
