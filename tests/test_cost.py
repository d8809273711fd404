"""dpcore.cost: formulas against hand-computed cases, the ZeRO paper's example, the fit, the CLI."""
import json
import math

import numpy as np
import pytest

from dpcore.cost import (ALGORITHMS, COLLECTIVES, Cost, Params, best_algorithm, cost, crossover,
                         fit, fit_line, predict, zero_memory)
from dpcore.cost.fit import Sample, fit_per_algorithm
from dpcore.cost.formulas import algorithms, send_recv
from dpcore.cost.params import params_for
from dpcore.cost.memory import min_ranks
from dpcore.cost.scaling import predict_scaling as scaling
from dpcore.cost.__main__ import main
from mpi_helpers import run_mpi, run_python
from test_direct import ptrace_allows_siblings

S = 8000.0


def same(a, b):
    return all(math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-9)
               for x, y in zip(vars(a).values(), vars(b).values()))


@pytest.mark.parametrize("algo, coll, n, want", [
    # ring: chunk S/n per step
    ("ring", "all_reduce", 4, Cost(6, 2 * 3 / 4 * S, 3 / 4 * S)),
    ("ring", "reduce_scatter", 4, Cost(3, 3 / 4 * S, 3 / 4 * S)),
    ("ring", "all_gather", 4, Cost(3, 3 / 4 * S)),
    # one_shot: write S, read n S, reduce (n-1) S
    ("one_shot", "all_reduce", 4, Cost(1, 5 * S, 3 * S)),
    ("one_shot", "reduce_scatter", 4, Cost(1, 2 * S, 3 / 4 * S)),
    ("one_shot", "all_gather", 4, Cost(1, S)),
    ("one_shot", "broadcast", 4, Cost(1, 2 * S)),
    # recursive doubling: log2 n exchanges of S; 6 ranks fold 2 extra ranks onto a core of 4
    ("recursive_doubling", "all_reduce", 8, Cost(3, 3 * S, 3 * S)),
    ("recursive_doubling", "all_reduce", 6, Cost(4, 4 * S, 3 * S)),
    ("recursive_doubling", "reduce_scatter", 8, Cost(3, 7 / 8 * S, 7 / 8 * S)),
    ("recursive_doubling", "all_gather", 8, Cost(3, 7 / 8 * S)),
    ("recursive_doubling", "broadcast", 5, Cost(3, 3 * S)),
    # Rabenseifner: 2 log2 n steps, the ring's bytes
    ("rabenseifner", "all_reduce", 8, Cost(6, 2 * 7 / 8 * S, 7 / 8 * S)),
    ("rabenseifner", "broadcast", 8, Cost(6, 2 * 7 / 8 * S)),
    # binary tree of 7: two full levels, each parent serves 2 children one after the other
    ("binary_tree", "broadcast", 7, Cost(4, 4 * S)),
    ("binary_tree", "all_reduce", 7, Cost(8, 8 * S, 4 * S)),
    ("binary_tree", "broadcast", 8, Cost(5, 5 * S)),
    # parameter server: n-1 messages in, n-1 out
    ("naive", "all_reduce", 4, Cost(6, 6 * S, 3 * S)),
    ("naive", "reduce_scatter", 4, Cost(6, 3 * S + 3 * S / 4, 3 * S)),
    ("naive", "all_gather", 4, Cost(6, 3 * S)),
    ("naive", "broadcast", 4, Cost(3, 3 * S)),
    # reduce: a chain to the root (one segment: n-1 hops of S, reduced at each), the root
    # reading every peer; gather and scatter: the root's port moves the n-1 shards not its own
    ("ring", "reduce", 4, Cost(3, 3 * S, 3 * S)),
    ("one_shot", "reduce", 4, Cost(1, 5 * S, 3 * S)),
    ("direct", "reduce", 4, Cost(1, 3 * S, 3 * S)),
    ("binary_tree", "reduce", 7, Cost(4, 4 * S, 4 * S)),
    ("recursive_doubling", "reduce", 5, Cost(3, 3 * S, 3 * S)),
    ("naive", "reduce", 4, Cost(3, 3 * S, 3 * S)),
    ("one_shot", "gather", 4, Cost(1, S)),
    ("direct", "gather", 4, Cost(1, 3 / 4 * S)),
    ("direct", "scatter", 4, Cost(1, 3 / 4 * S)),
    ("recursive_doubling", "scatter", 8, Cost(3, 7 / 8 * S)),
    ("recursive_doubling", "gather", 8, Cost(3, 7 / 8 * S)),
    ("binary_tree", "scatter", 7, Cost(4, (3 + 3 + 1 + 1) / 7 * S)),  # the largest subtree a side
    ("naive", "gather", 4, Cost(3, 3 / 4 * S)),
    ("naive", "scatter", 4, Cost(3, 3 / 4 * S)),
    # all_to_all: one_shot writes S and reads S; direct reads a chunk from every peer
    ("one_shot", "all_to_all", 4, Cost(1, 2 * S)),
    ("direct", "all_to_all", 4, Cost(1, 3 / 4 * S)),
])
def test_hand_computed(algo, coll, n, want):
    assert same(cost(coll, algo, S, n), want)


def test_ring_broadcast_is_a_pipelined_chain():
    # 4 ranks, 4 segments of S/4: the last segment leaves at step 3 and arrives 2 steps later
    assert same(cost("broadcast", "ring", S, 4, segment=S / 4), Cost(6, 6 * S / 4))
    # one segment: no pipelining, n-1 hops of S
    assert same(cost("broadcast", "ring", S, 4, segment=S), Cost(3, 3 * S))


def test_hierarchical_all_reduce():
    # 2 nodes x 4: ring reduce-scatter + all-gather inside (3 + 3 steps of S/4), ring
    # all-reduce of S/4 between the 2 nodes (2 steps of S/8 on the slow link)
    c = cost("all_reduce", "hierarchical", S, 8, local_size=4)
    assert same(c, Cost(6, 6 / 4 * S, 3 / 4 * S + 1 / 2 * S / 4, 2, 2 / 2 * S / 4))
    fast, slow = Params(1e-6, 1e-11), Params(1e-6, 1e-11, 0, 1e-5, 1e-10)
    assert predict("all_reduce", "hierarchical", S, 8, slow, local_size=4) > \
        predict("all_reduce", "hierarchical", S, 8, fast, local_size=4)
    with pytest.raises(ValueError):
        cost("all_reduce", "hierarchical", S, 6, local_size=4)


def test_ring_all_reduce_time_is_the_textbook_formula():
    # T = 2(n-1) alpha + 2(n-1)/n S / B, the headline
    p, n, nbytes = Params.from_rates(5, 10), 8, 1e8
    want = 2 * (n - 1) * 5e-6 + 2 * (n - 1) / n * nbytes / 10e9
    assert math.isclose(predict("all_reduce", "ring", nbytes, n, p), want)


@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.parametrize("coll", COLLECTIVES)
def test_one_rank_costs_nothing_and_costs_grow_with_size(algo, coll):
    if algo not in algorithms(coll):
        with pytest.raises(ValueError, match=f"^{algo} does not run {coll}; its algorithms: "
                                             f"{', '.join(algorithms(coll))}$"):
            cost(coll, algo, S, 4, local_size=2)
        return
    kw = {"local_size": 1} if algo == "hierarchical" else {}
    assert same(cost(coll, algo, S, 1, **kw), Cost())
    p = Params(1e-6, 1e-10, 1e-10)
    assert predict(coll, algo, 2 * S, 4, p, local_size=2) >= \
        predict(coll, algo, S, 4, p, local_size=2) > 0


def test_the_algorithms_of_each_collective():
    assert algorithms("all_reduce") == ALGORITHMS
    assert algorithms("reduce") == ("ring", "one_shot", "direct", "recursive_doubling",
                                    "binary_tree", "naive")
    assert algorithms("gather") == algorithms("scatter") == \
        ("one_shot", "direct", "recursive_doubling", "binary_tree", "naive")
    assert algorithms("all_to_all") == ("one_shot", "direct")


def test_send_recv_is_one_message():
    assert same(send_recv(S), Cost(1, S))
    p = Params(2e-6, 1e-9)
    assert p.time(send_recv(S), S) == pytest.approx(2e-6 + S * 1e-9)


def test_crossover_one_shot_ring_matches_algebra():
    # 2 ranks: one_shot = a + 3 S b + S g, ring = 2a + S b + S/2 g; equal at S = a / (2b + g/2)
    p = Params(alpha=4e-6, beta=2e-10, gamma=1e-10)
    x = crossover("all_reduce", "one_shot", "ring", 2, p)
    assert math.isclose(x, p.alpha / (2 * p.beta + p.gamma / 2), rel_tol=1e-3)
    assert crossover("all_reduce", "ring", "rabenseifner", 8, Params(0, 1e-10)) is None


def test_best_algorithm_small_latency_large_bandwidth():
    p = Params.from_rates(5, 10, 40)
    algo, reason = best_algorithm("all_reduce", 1024, 8, p, ["one_shot", "ring"])
    assert algo == "one_shot" and "latency-bound" in reason and "ring" in reason
    algo, reason = best_algorithm("all_reduce", 64 << 20, 8, p, ["one_shot", "ring"])
    assert algo == "ring" and "bandwidth-bound" in reason
    algo, _ = best_algorithm("all_reduce", 1024, 8, p, ["one_shot", "ring"],
                             limits={"one_shot": 512})
    assert algo == "ring"
    per_algo = {"one_shot": Params(1e-6, 1e-9), "ring": Params(1e-5, 1e-10)}
    assert best_algorithm("all_reduce", 64, 2, per_algo, ["one_shot", "ring"])[0] == "one_shot"
    assert "\n" not in reason


# -- ZeRO memory ------------------------------------------------------------------------------

def test_zero_paper_example():
    # ZeRO paper, figure 1: 7.5 B parameters, 64 ranks, mixed-precision Adam
    totals = [zero_memory(7.5e9, 64, s)["total"] / 1e9 for s in range(4)]
    assert [round(t, 1) for t in totals] == [120.0, 31.4, 16.6, 1.9]


def test_zero_stages_and_precisions():
    m = zero_memory(70e9, 8, 2)
    assert m["params"] == 140e9 and m["grads"] == 140e9 / 8 and m["optimizer"] == 12 * 70e9 / 8
    assert zero_memory(1e9, 4, 0, "fp32")["total"] == 16e9
    assert zero_memory(1e9, 4, 3, "fp32")["total"] == 4e9
    assert min_ranks(70e9, 2, 80e9) is None          # 140 GB of fp16 weights never fit
    assert min_ranks(70e9, 3, 80e9) == 14             # 16 psi / N <= 80 GB
    assert min_ranks(7.5e9, 1, 80e9) == 2             # 30 GB + 90 GB / N <= 80 GB


# -- scaling ----------------------------------------------------------------------------------

def test_weak_scaling_by_hand():
    link = Params.from_rates(10, 25)
    rows = scaling(1e9, [1, 8], link, step_flops=1e14, flops_per_rank=1e14, grad_bytes=2)
    assert rows[0].efficiency == 1 and rows[0].comm == 0
    comm = 14 * 10e-6 + 2 * 7 / 8 * 2e9 / 25e9
    assert math.isclose(rows[1].comm, comm)
    assert math.isclose(rows[1].efficiency, 1 / (1 + comm))
    overlapped = scaling(1e9, [8], link, 1e14, 1e14, 2, overlap=True)[0]
    assert overlapped.exposed < rows[1].exposed and overlapped.efficiency > rows[1].efficiency
    strong = scaling(1e9, [8, 64], link, 1e14, 1e14, 2, strong=True)
    assert strong[1].efficiency < strong[0].efficiency


# -- fit --------------------------------------------------------------------------------------

def synthetic(params_by_algo, n=2, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for algo, p in params_by_algo.items():
        for coll in ("all_reduce", "all_gather"):
            for nbytes in [1 << k for k in range(8, 25, 2)]:
                t = predict(coll, algo, nbytes, n, p) * (1 + noise * rng.standard_normal())
                out.append(Sample(coll, algo, n, nbytes, t))
    return out


def test_fit_line_recovers_intercept_and_slope():
    x = np.array([1e3, 1e4, 1e5, 1e6])
    a, b = fit_line(x, 3e-6 + 2e-10 * x)
    assert math.isclose(a, 3e-6, rel_tol=1e-9) and math.isclose(b, 2e-10, rel_tol=1e-9)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_fit_recovers_known_alpha_beta_gamma(n):
    # one_shot always takes one step, so its overhead and alpha are one number: truth has none
    truth = {"ring": Params(3e-6, 1.5e-10, 6e-11, overhead=2e-5),
             "one_shot": Params(1e-6, 5e-11, 2e-11)}
    got = fit_per_algorithm(synthetic(truth, n))
    for algo, p in truth.items():
        for k in ("alpha", "beta", "gamma", "overhead"):
            assert math.isclose(getattr(got[algo], k), getattr(p, k), rel_tol=1e-6,
                                abs_tol=1e-15), (algo, k)


def test_fit_finds_the_cache_where_there_is_one():
    # the bytes that miss an 8 MiB cache move at half the speed: the fit finds the bend and
    # the two speeds, and adds none where every size moves at one speed (the test above)
    truth = Params(3e-6, 1.5e-10, 6e-11, overhead=2e-5, cache_bytes=8 << 20, beta_mem=3e-10)
    sizes = [4 ** k for k in range(5, 15)]  # 1 KiB .. 256 MiB
    samples = [Sample(coll, "ring", 2, nbytes, predict(coll, "ring", nbytes, 2, truth))
               for coll in ("all_reduce", "all_gather") for nbytes in sizes]
    got = fit(samples)
    for k in ("alpha", "beta", "gamma", "overhead", "cache_bytes", "beta_mem"):
        assert math.isclose(getattr(got, k), getattr(truth, k), rel_tol=1e-6), k
    assert truth.spilled(8 << 20) == 0.5 and truth.spilled(24 << 20) == 0.75
    flat = fit(synthetic({"ring": Params(3e-6, 1.5e-10, 6e-11)}, 2))
    assert flat.cache_bytes is None and flat.beta_mem is None


def test_each_collective_alone_predicts_itself():
    # all_gather moves clean data at one speed, all_reduce data the peer just wrote, which is
    # slower in the cache and faster past it: no one set of numbers fits both, so "ring" is a
    # compromise and "ring/all_reduce" (fitted alone, its cache included) predicts all_reduce
    gather = Params(3e-6, 1.0e-10, overhead=2e-5)
    reduce = Params(3e-6, 3.0e-10, overhead=2e-5, cache_bytes=16 << 20, beta_mem=1.5e-10)
    sizes = [4 ** k for k in range(5, 15)]  # 1 KiB .. 256 MiB
    samples = [Sample(coll, "ring", 2, nbytes, predict(coll, "ring", nbytes, 2, truth))
               for coll, truth in (("all_gather", gather), ("all_reduce", reduce))
               for nbytes in sizes]
    got = fit_per_algorithm(samples)
    assert {"ring", "ring/all_reduce", "ring/all_gather"} == set(got)
    alone = got["ring/all_reduce"]
    assert params_for(got, "ring", "all_reduce") is alone
    assert params_for(got, "ring") is got["ring"]
    assert math.isclose(alone.cache_bytes, 16 << 20) and math.isclose(alone.beta_mem, 1.5e-10)
    for nbytes in sizes:
        want = predict("all_reduce", "ring", nbytes, 2, reduce)
        assert math.isclose(predict("all_reduce", "ring", nbytes, 2, got), want, rel_tol=1e-6)
    worst = max(abs(predict("all_reduce", "ring", s, 2, got["ring"]) /
                    predict("all_reduce", "ring", s, 2, reduce) - 1) for s in sizes)
    assert worst > 0.15  # the joint fit is 23 % off somewhere


def test_fit_with_noise_and_with_only_all_reduce():
    truth = Params(3e-6, 1.5e-10, 6e-11)
    got = fit(synthetic({"ring": truth}, 4, noise=0.03))
    assert abs(got.alpha / truth.alpha - 1) < 0.15 and abs(got.beta / truth.beta - 1) < 0.15
    # all_reduce alone cannot tell beta from gamma, nor alpha from a per-call overhead: gamma
    # and overhead stay 0, beta and alpha take their share
    only = [s for s in synthetic({"ring": truth}, 4) if s.coll == "all_reduce"]
    got = fit(only)
    assert got.gamma == 0 and got.overhead == 0 and got.beta > truth.beta
    assert all(math.isclose(predict(s.coll, s.algo, s.nbytes, s.n, got), s.seconds,
                            rel_tol=1e-6) for s in only)


# -- the command line -------------------------------------------------------------------------

@pytest.fixture
def run(capsys):
    """run(*args): `python -m dpcore.cost *args` in this process; its printed output."""
    def run(*args):
        assert main(list(args)) == 0
        return capsys.readouterr().out
    return run


def test_cli_memory(run):
    out = run("memory", "--params", "7.5e9", "--ranks", "64")
    for gb in ("120.0 GB", "31.4 GB", "16.6 GB", "1.9 GB"):
        assert gb in out
    out = run("memory", "--params", "70e9", "--ranks", "8", "--stage", "2")
    assert "140.0 GB" in out and "weights alone" in out and "never" in out
    assert "fp32" in run("memory", "--params", "1e9", "--ranks", "8", "--precision", "fp32")


def test_cli_scaling_and_predict(run):
    out = run("scaling", "--params", "1.3e9", "--ranks", "1,8,64,1024", "--bandwidth", "25",
              "--latency", "10", "--flops-per-rank", "150e12")
    assert "efficiency" in out and "weak scaling" in out and "1024" in out
    assert "hierarchical" in run("scaling", "--hierarchical", "8", "--overlap")
    out = run("predict", "all_reduce", "--ranks", "8", "--alpha", "5", "--bandwidth", "10")
    assert "best by the model" in out and "rabenseifner" in out
    out = run("predict", "all_to_all", "--ranks", "4", "--sizes", "64,1M")
    rows = [line.split()[0] for line in out.splitlines() if line.endswith("gamma")]
    assert rows == ["one_shot", "direct"]  # only the algorithms that run it
    out = run("predict", "gather", "--ranks", "4", "--alpha", "1", "--bandwidth", "0.1")
    assert "ring" not in out and "direct: " in out  # direct beats one_shot at the same numbers


@pytest.mark.parametrize("command", [["memory", "--params", "7.5e9", "--ranks", "64"],
                                     ["scaling", "--ranks", "8,64,1024", "--overlap"]])
def test_cli_plots(run, tmp_path, command):
    pytest.importorskip("matplotlib")
    png = tmp_path / "figure.png"
    assert f"plot: {png}" in run(*command, "--plot", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_runs_as_a_command(run):
    """`python -m dpcore.cost` itself, once: what it prints is what main() prints."""
    args = ["predict", "broadcast", "--ranks", "5", "--alpha", "2", "--bandwidth", "20"]
    _, output = run_python(["-m", "dpcore.cost", *args])
    assert output == run(*args) and "best by the model" in output


@pytest.mark.mpi
def test_cli_fit_under_mpiexec(tmp_path):
    out_file = tmp_path / "cost.json"
    png = tmp_path / "fit.png"
    plot = ["--plot", png] if _importable("matplotlib") else []
    _, output = run_mpi(2, ["-m", "dpcore.cost", "fit", "--quick", "--out", out_file, *plot])
    assert not plot or png.read_bytes()[:4] == b"\x89PNG"
    doc = json.loads(out_file.read_text())
    fitted = {"one_shot", "ring"} | ({"direct"} if ptrace_allows_siblings() else set())
    # each algorithm on both collectives, and on each alone
    fitted |= {f"{a}/{c}" for a in fitted for c in ("all_reduce", "all_gather")}
    assert doc["ranks"] == 2 and set(doc["algorithms"]) == fitted
    for p in doc["algorithms"].values():
        assert p["alpha"] >= 0 and p["beta"] >= 0 and p["gamma"] >= 0
    # Noise on a loaded machine can push a fit of few small sizes (one_shot's, or one collective
    # alone) to beta 0; the ring's, fitted up to megabytes on both collectives, still sees bytes.
    assert doc["algorithms"]["ring"]["beta"] > 0
    assert "fitted" in output and "round 1 of" in output


def _importable(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.parametrize("args, why", [
    (["scaling", "--hierarchical", "3"], "do not split into nodes of 3"),
    (["predict", "all_reduce", "--sizes", "1K,abc"], "'abc'"),
    (["predict", "all_reduce", "--fit", "missing.json"], "missing.json"),
    (["memory", "--params", "-1", "--ranks", "2"], "-1"),
    (["scaling", "--params", "0"], "0"),
])
def test_cli_refuses_what_it_cannot_use_in_one_line(args, why, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as refused:
        main(args)
    err = capsys.readouterr().err
    assert refused.value.code == 2 and why in err and "Traceback" not in err, err


def test_cli_refuses_a_fit_that_is_not_json(capsys, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not json\n")
    with pytest.raises(SystemExit) as refused:
        main(["predict", "all_reduce", "--fit", str(bad)])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "notes.txt" in err, err


def test_cli_sizes_read_as_the_bench_reads_them():
    from dpcore.bench.options import parse_size
    from dpcore.cost.units import parse_bytes

    assert parse_size is parse_bytes or all(
        parse_size(s) == parse_bytes(s) for s in ("8", "1K", "64M", "1G", "2k", "1e6", "4KiB"))
    for bad in ("abc", "-1K", "1Q", "", "inf", "nan"):
        with pytest.raises(ValueError):
            parse_bytes(bad)
