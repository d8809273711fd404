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
