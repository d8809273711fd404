"""algo="auto" from the fitted crossover (dpcore.cost.auto): no MPI needed, nothing timed.

Synthetic parameters make the crossover known in advance: one_shot costs 1 us + 3 S x 1 ns on
2 ranks (all_reduce: (n+1) S bytes), the ring 2 us + S x 1 ns (2(n-1)/n S bytes), so they cross
where 1 us + 3 S ns = 2 us + S ns, at S = 500 bytes.
"""
import json
import math
import os

import pytest

from dpcore.dtypes import ALGORITHMS
from dpcore.cost import Params, auto, crossover, save

ONE_SHOT = Params(alpha=1e-6, beta=1e-9)
RING = Params(alpha=1e-6, beta=1e-9, overhead=0.0)  # 2 steps on 2 ranks: 2 us
SYNTHETIC = {"one_shot": ONE_SHOT, "ring": RING}
LIMIT = 256 << 10


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    """No fitted file unless a test writes one (XDG_CACHE_HOME points at an empty folder), no
    DPCORE_ONE_SHOT_MAX from the caller's environment, and an empty cache before and after."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DPCORE_ONE_SHOT_MAX", raising=False)
    monkeypatch.setattr(auto, "EXPLAIN", False)
    auto.forget()
    yield
    auto.forget()


def write_fit(tmp_path, params=SYNTHETIC, transport="shm"):
    path = tmp_path / "cache" / "dpcore" / "cost.json"
    save(str(path), params, ranks=2, transport=transport, dtype="float32")
    return path


def test_synthetic_crossover_is_where_the_docstring_says():
    x = crossover("all_reduce", "one_shot", "ring", 2, SYNTHETIC)
    assert x == pytest.approx(500, rel=1e-6)


def test_picks_by_the_fitted_crossover(tmp_path):
    write_fit(tmp_path)
    lo, hi, _ = auto.band("all_reduce", 2, LIMIT)
    assert lo == 0 and hi in (499, 500)  # at 500 bytes both take 2.5 us: either will do
    for nbytes, want in [(8, "one_shot"), (499, "one_shot"), (501, "ring"), (4096, "ring")]:
        algo, reason = auto.auto_algorithm("all_reduce", nbytes, 2, LIMIT)
        assert algo == want, (nbytes, reason)
        assert "crossover" in reason and "predicted" in reason
        assert auto.auto_code("all_reduce", nbytes, 2, LIMIT) == ALGORITHMS[want]
    assert "below" in auto.auto_algorithm("all_reduce", 8, 2, LIMIT)[1]
    assert "above" in auto.auto_algorithm("all_reduce", 4096, 2, LIMIT)[1]


def test_crossover_moves_with_the_rank_count(tmp_path):
    """On 4 ranks one_shot reads 5 S and the ring sends 1.5 S in 6 steps: 1 + 5 S/1000 =
    6 + 1.5 S/1000 us at S = 10000/7 bytes."""
    write_fit(tmp_path)
    assert auto.band("all_reduce", 4, LIMIT)[1] == math.ceil(10000 / 7) - 1


def test_without_fitted_params_the_default_switch(tmp_path):
    assert auto.model()[0] is None
    default = auto.ONE_SHOT_MAX
    assert auto.auto_algorithm("all_reduce", default, 2, LIMIT)[0] == "one_shot"
    algo, reason = auto.auto_algorithm("all_reduce", default + 1, 2, LIMIT)
    assert algo == "ring" and "default" in reason and "dpcore.cost fit" in reason
    # more ranks than this machine's cores: every ring step waits for a context switch, so
    # one_shot goes further (128 KiB)
    crowded = auto.default_one_shot_max(8, "shm")
    assert crowded == (auto.ONE_SHOT_MAX_OVERSUBSCRIBED if len(os.sched_getaffinity(0)) < 8
                       else default)
    assert auto.auto_code("reduce_scatter", crowded, 8, LIMIT, transport="shm") == 0
    assert auto.auto_code("reduce_scatter", crowded + 1, 8, LIMIT, transport="shm") == 1
    assert auto.default_one_shot_max(8, "mpi") == default  # ranks on other nodes: not crowded


def test_one_shot_limit_is_respected(tmp_path):
    # one_shot faster at every size (the ring pays a large per-call overhead): still capped
    write_fit(tmp_path, {"one_shot": ONE_SHOT, "ring": Params(1e-6, 1e-9, overhead=1.0)})
    assert auto.auto_algorithm("all_reduce", 4096, 2, 4096)[0] == "one_shot"
    algo, reason = auto.auto_algorithm("all_reduce", 4097, 2, 4096)
    assert algo == "ring" and "slot" in reason
    # and without a fit, a limit below the default switch wins too
    auto.use_params(None)
    assert auto.auto_algorithm("all_gather", 1024, 2, 512)[0] == "ring"


def test_ring_faster_everywhere_means_never_one_shot(tmp_path):
    write_fit(tmp_path, {"one_shot": Params(1.0, 1e-9), "ring": RING})
    assert auto.band("all_reduce", 2, LIMIT)[:2] == (1, 0)  # empty
    algo, reason = auto.auto_algorithm("all_reduce", 0, 2, LIMIT)
    assert algo == "ring" and "every size" in reason


def test_environment_overrides_the_fit(tmp_path, monkeypatch):
    write_fit(tmp_path)
    monkeypatch.setenv("DPCORE_ONE_SHOT_MAX", "2048")
    algo, reason = auto.auto_algorithm("all_reduce", 2048, 2, LIMIT)
    assert algo == "one_shot" and "DPCORE_ONE_SHOT_MAX=2048" in reason
    assert auto.auto_algorithm("all_reduce", 2049, 2, LIMIT)[0] == "ring"


def test_a_fit_for_another_transport_is_not_used(tmp_path):
    write_fit(tmp_path, transport="shm")
    assert auto.auto_algorithm("all_reduce", 4096, 2, LIMIT, transport="shm")[0] == "ring"
    algo, reason = auto.auto_algorithm("all_reduce", 4096, 2, LIMIT, transport="mpi")
    assert algo == "one_shot" and "transport shm" in reason  # the default switch, 4 KiB


def test_cached_per_collective_and_ranks(tmp_path, monkeypatch):
    write_fit(tmp_path)
    calls = []
    real = auto.crossover
    monkeypatch.setattr(auto, "crossover", lambda *a, **k: calls.append(a[:4]) or real(*a, **k))
    for nbytes in (8, 100, 1000, 1 << 20):
        auto.auto_code("all_reduce", nbytes, 2, LIMIT)
        auto.auto_algorithm("all_reduce", nbytes, 2, LIMIT)
    assert calls == [("all_reduce", "one_shot", "ring", 2)]
    auto.auto_code("all_reduce", 8, 4, LIMIT)
    auto.auto_code("all_gather", 8, 2, LIMIT)
    assert len(calls) == 3
    # the file is read once, not per call
    path = tmp_path / "cache" / "dpcore" / "cost.json"
    path.write_text(json.dumps({"algorithms": {}}))
    assert auto.auto_algorithm("all_reduce", 4096, 2, LIMIT)[0] == "ring"
    auto.forget()  # until told to reload: the empty file means no model
    assert auto.auto_algorithm("all_reduce", 4096, 2, LIMIT)[0] == "one_shot"


def test_explain_prints_once_per_size_class(tmp_path, monkeypatch, capsys):
    write_fit(tmp_path)
    monkeypatch.setattr(auto, "EXPLAIN", True)
    for nbytes in (8, 9, 15, 16, 4096, 4097, 8):
        auto.auto_code("all_reduce", nbytes, 2, LIMIT, rank=0)
    auto.auto_code("all_reduce", 4096, 2, LIMIT, rank=1)  # only rank 0 speaks
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3, lines  # 8-15, 16-31, 4096-8191
    assert all(line.startswith("dpcore auto: ") for line in lines)
    assert lines[0].startswith("dpcore auto: one_shot") and "ring" in lines[2]


def test_agree_shares_rank_0s_parameters(tmp_path):
    class FakeGroup:  # what agree() uses of a dpcore.setup.bootstrap.Group
        def __init__(self, rank):
            self.rank = rank

        def bcast(self, obj, root, what):
            return (SYNTHETIC, "rank 0's file", "shm") if self.rank else obj

    auto.agree(FakeGroup(1))  # this rank has no file; rank 0's parameters arrive
    assert auto.auto_algorithm("all_reduce", 501, 2, LIMIT)[0] == "ring"
    assert auto.model()[1] == "rank 0's file"


def test_the_hot_path_is_a_dict_lookup(tmp_path):
    """Not a timing assertion: after the first call the choice comes from the dict a
    Communicator holds (bands()), keyed by the collective's name alone."""
    write_fit(tmp_path)
    held = auto.bands(2, LIMIT, "shm")
    assert held == {}
    assert auto.auto_code("all_reduce", 8, 2, LIMIT, transport="shm") == 0
    assert held == {"all_reduce": auto.band("all_reduce", 2, LIMIT, "shm")[:2]}
    auto._model = None  # would fail if anything but the held band were consulted
    auto._BANDS.clear()
    assert auto.auto_code("all_reduce", 8, 2, LIMIT, transport="shm") == 0
    assert auto.auto_code("all_reduce", 1 << 20, 2, LIMIT, transport="shm") == 1


def test_new_parameters_reach_a_held_dict(tmp_path):
    """use_params() and forget() empty the held dicts in place, so a live Communicator
    refills its own from the new parameters."""
    write_fit(tmp_path)
    held = auto.bands(2, LIMIT, "shm")
    assert auto.auto_code("all_reduce", 4096, 2, LIMIT, transport="shm") == 1  # above 500 B
    auto.use_params(None)
    assert held == {} and auto.bands(2, LIMIT, "shm") is held
    assert auto.auto_code("all_reduce", 4096, 2, LIMIT, transport="shm") == 0  # default 4 KiB


def test_a_fit_made_on_another_rank_count_is_said_once(tmp_path, capsys):
    class Rank0Of:  # what agree() uses of a dpcore.setup.bootstrap.Group, on rank 0
        rank = 0

        def __init__(self, size):
            self.size = size

        def bcast(self, obj, root, what):
            return obj

    path = write_fit(tmp_path)  # fitted on 2 ranks
    auto.agree(Rank0Of(2))
    assert capsys.readouterr().err == ""
    auto.agree(Rank0Of(3))
    auto.agree(Rank0Of(3))
    said = capsys.readouterr().err
    assert said.count(f"cost model in {path}, fitted on 2 ranks, for 3 ranks") == 1, said
    assert "mpiexec -n 3 python -m dpcore.cost fit" in said


def test_without_a_ring_auto_weighs_one_shot_against_direct(tmp_path):
    """gather on 2 ranks: one_shot 1 us + S x 1 ns (S through the slot), direct 2 us + S/2 x
    1 ns (the root reads the other half): they cross at S = 2000 bytes; past it, direct."""
    write_fit(tmp_path, {**SYNTHETIC, "direct": Params(alpha=2e-6, beta=1e-9)})
    assert auto.beyond("gather") == "direct" and auto.beyond("reduce") == "ring"
    lo, hi, _ = auto.band("gather", 2, LIMIT)
    assert lo == 0 and hi in (1999, 2000)
    for nbytes, want in [(8, "one_shot"), (4096, "direct")]:
        algo, reason = auto.auto_algorithm("gather", nbytes, 2, LIMIT)
        assert algo == want and f"vs {'direct' if want == 'one_shot' else 'one_shot'}" in reason
        assert auto.auto_code("gather", nbytes, 2, LIMIT) == ALGORITHMS[want]
    assert auto.auto_algorithm("all_to_all", LIMIT + 1, 2, LIMIT)[0] == "direct"
