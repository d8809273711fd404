"""Outputs that cannot be right, on every transport (shared memory, MPI, virtual nodes flat and
hierarchical):

- an `out` that partly overlaps the input is refused with ValueError on the rank that passed
  it, before anything is sent, while the in-place forms stay exact (scripts/overlap.py);
- an all_gather `out` that does not fit the peers' shards, which only the headers show, is
  refused on every rank alike (ValueError where it was passed, CommError naming that rank on
  the others) and leaves the communicator usable (scripts/refused.py).
"""
import pytest

from mpi_helpers import run_ok
from transport_configs import CONFIGS

pytestmark = pytest.mark.mpi

OUT_CONFIGS = {k: CONFIGS[k] for k in ("shm-1", "shm-2", "shm-3", "mpi-2", "nodes-of-2-uneven",
                                       "nodes-of-2-x2")}


@pytest.mark.parametrize("config", OUT_CONFIGS.values(), ids=OUT_CONFIGS)
def test_a_partly_overlapping_out_is_refused_locally_and_in_place_stays_exact(config):
    run_ok("overlap.py", config.ranks, env=config.env, timeout=180)


@pytest.mark.parametrize("config", OUT_CONFIGS.values(), ids=OUT_CONFIGS)
def test_an_all_gather_out_that_does_not_fit_is_refused_everywhere_and_the_communicator_lives(
        config):
    run_ok("refused.py", config.ranks, env=config.env, timeout=180)


def test_fits_out_accepts_only_what_the_full_checks_accept():
    """all_reduce's one-step check (_C.fits_out) lets a call skip the full checks
    (dpcore/comm/communicator.py), so it must refuse everything they refuse; what it refuses
    goes to them for the message."""
    import numpy as np

    from dpcore import _C

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert _C.fits_out(x, np.empty_like(x))
    assert _C.fits_out(x, x) and _C.fits_out(x, x.view())  # in place: its very memory
    assert _C.fits_out(np.empty(0, np.float32), np.empty(0, np.float32))
    frozen = np.empty_like(x)
    frozen.flags.writeable = False
    buf = np.zeros(16, np.float32)
    for out in (np.empty_like(x, np.float64), np.empty(12, np.float32), np.empty((4, 3), np.float32),
                np.empty((3, 8), np.float32)[:, ::2], frozen):
        assert not _C.fits_out(x, out)
    assert not _C.fits_out(buf[:12], buf[2:14])  # partly overlapping
    assert not _C.fits_out(np.asfortranarray(x), np.empty_like(x))
