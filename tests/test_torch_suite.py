"""PyTorch's own distributed test suite on the dpcore backend (tests/torch_suite/: run.py runs
it, on gloo or dpcore, whole or in part; compare.py compares two runs). Here a slice of it, a
test per new verb at 2 ranks, each test its own ranks spawned by torch; the whole suite is run
by hand (benchmarks/results/2026-12-03-torch-suite/README.md)."""
from pathlib import Path

import pytest

from mpi_helpers import run_python
from torch_suite.compare import read, table


RUN = Path(__file__).resolve().parent / "torch_suite" / "run.py"
# issue 24's verbs, gloo's sparse all_reduce and the barrier timeout's wording torch expects;
# the verbs dpcore had before, gather, scatter and batches run in dpcore's own torch tests
# (test_torch_backend.py, scripts/torch_exchanges.py): each test here costs ~5 s
SLICE = [
    "test_sparse_all_reduce_sum", "test_barrier_timeout_global", "test_reduce_sum",
    "test_send_recv_any_source", "test_all_to_all_single_unequal_split",
]


@pytest.mark.torch
@pytest.mark.slow
def test_a_slice_of_torchs_suite_passes_on_dpcore(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("expecttest")  # torch's test helpers import it
    outcomes = tmp_path / "dpcore-2.tsv"
    run_python([RUN, "--backend", "dpcore", "--world-size", "2", "--out", outcomes, *SLICE],
               timeout=600, check=False)
    rows = read(outcomes)
    assert {t: rows.get(t, ("not run", "")) for t in SLICE
            if rows.get(t, ("not run",))[0] != "passed"} == {}


def test_compare_counts_only_the_tests_both_runs_ran_when_asked(tmp_path):
    """Runs cut short at different points (the 3-rank runs) are compared on what both ran."""
    gloo, dpcore = tmp_path / "gloo.tsv", tmp_path / "dpcore.tsv"
    gloo.write_text("# gloo\ntest_a\tpassed\t\ntest_b\tskipped\tno\ntest_c\tpassed\t\n")
    dpcore.write_text("# dpcore\ntest_a\tpassed\t\ntest_b\tpassed\t\n")
    everything = table([gloo, dpcore], markdown=False).splitlines()
    assert everything[1].split() == ["gloo", "2", "0", "1"]
    assert "passed on gloo, not on dpcore: 1" in everything  # test_c: not run
    common = table([gloo, dpcore], markdown=False, common=True).splitlines()
    assert common[1].split() == ["gloo", "1", "0", "1"]
    assert common[2].split() == ["dpcore", "2", "0", "0"]
    assert "passed on gloo, not on dpcore: 0" in common
