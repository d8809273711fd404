"""The bench beside the cost model: pred_us and model_err% columns, the algorithm auto ran, --plot.

A synthetic parameter file (known alpha and beta) is passed with --model, so every prediction
can be recomputed here exactly; nothing asserts on a measured time.
"""
import sys

import pytest

from dpcore.bench.table import time_text
from dpcore.cost import Params, auto, predict, save
from dpcore.settings import Settings
from test_bench import bench, bench_here

SYNTHETIC = {"one_shot": Params(alpha=1e-6, beta=1e-9), "ring": Params(alpha=1e-6, beta=1e-9)}
SMALL = ["-b", "256", "-e", "64K", "-f", "16", "-n", "2", "-w", "1"]


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "synthetic.json"
    save(str(path), SYNTHETIC, ranks=2, transport="shm", dtype="float32")
    return path


def header_names(output):
    return next(line for line in output.splitlines()
                if line.startswith("#") and "busbw" in line).split()


def used(rows):
    """The algorithm --algo auto ran per row, direct counted as the ring (the tuner's other arm)."""
    return [r["algo_used"].replace("direct", "ring") for r in rows]


def default_rule(rows):
    """auto without a fitted model: one_shot up to dpcore.cost.auto.ONE_SHOT_MAX, then the ring."""
    return ["one_shot" if r["size"] <= auto.ONE_SHOT_MAX else "ring" for r in rows]


def fitted_rule(rows, n):
    """auto by the synthetic model's crossover."""
    auto.use_params(SYNTHETIC, "test", "shm")
    try:
        return [auto.auto_algorithm("all_reduce", r["size"], n, Settings().one_shot_bytes)[0]
                for r in rows]
    finally:
        auto.forget()


@pytest.mark.mpi
def test_model_columns_and_plot(tmp_path, model_file):
    plot = tmp_path / "busbw.png"
    has_matplotlib = _importable("matplotlib")
    extra = ["--plot", str(plot)] if has_matplotlib else []
    output, doc = bench(tmp_path, 2, "all_reduce", *SMALL, "--compare", "mpi",
                        "--model", str(model_file), *extra)
    names = header_names(output)
    assert {"algo", "pred_us", "model_err%", "#wrong", "mpi"} <= set(names), names
    assert f"# model: {model_file}" in output and "# Model error" in output
    assert doc["wrong"] == 0 and doc["model"] == str(model_file)
    assert len(doc["rows"]) == 3
    for row in doc["rows"]:
        want = predict("all_reduce", row["algo_used"], row["size"], 2, SYNTHETIC) * 1e6
        assert row["pred_us"] == pytest.approx(want)
        assert row["model_err%"] == pytest.approx(
            (row["pred_us"] - row["ip_time_us"]) / row["ip_time_us"] * 100)
        printed = next(line.split() for line in output.splitlines()
                       if line.split()[:2] == [str(row["size"]), str(row["count"])])
        assert printed[-3:] == [row["algo_used"], time_text(row["pred_us"]),
                                f"{row['model_err%']:+.0f}"]
    assert used(doc["rows"]) in (default_rule(doc["rows"]), fitted_rule(doc["rows"], 2)), doc
    if has_matplotlib:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"# plot: {plot}" in output


@pytest.mark.mpi
def test_a_fixed_algorithm_is_what_is_predicted(tmp_path, model_file):
    _, doc = bench(tmp_path, 2, "all_gather", "-b", "1K", "-e", "16K", "-f", "16", "-n", "1",
                   "-w", "0", "--algo", "ring", "--model", str(model_file))
    for row in doc["rows"]:
        assert row["algo_used"] == "ring"
        assert row["pred_us"] == pytest.approx(
            predict("all_gather", "ring", row["size"], 2, SYNTHETIC) * 1e6)


def test_without_a_fit_a_hint_and_no_columns(tmp_path, capsys):
    output, doc = bench_here(tmp_path, capsys, "all_reduce", *SMALL)
    assert "pred_us" not in header_names(output) and "algo" in header_names(output)
    assert "# no fitted cost model: `mpiexec -n 2 python -m dpcore.cost fit`" in output
    for row in doc["rows"]:
        assert "pred_us" not in row and "model_err%" not in row
    assert used(doc["rows"]) == default_rule(doc["rows"]) == ["one_shot", "one_shot", "ring"], doc
    assert "model" not in doc


def test_the_default_fit_file_is_used(tmp_path, capsys):
    save(str(tmp_path / "cache" / "dpcore" / "cost.json"), SYNTHETIC, ranks=2, transport="shm")
    output, doc = bench_here(tmp_path, capsys, "broadcast", *SMALL)
    assert "pred_us" in header_names(output)
    assert all("pred_us" in row for row in doc["rows"])


def test_a_missing_model_file_is_an_error(tmp_path, capsys):
    output, doc = bench_here(tmp_path, capsys, "all_reduce", *SMALL, "--model", "nothing.json",
                             status=2)
    assert "--model nothing.json: no such file" in output and doc is None


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    output, _ = bench_here(tmp_path, capsys, "all_reduce", *SMALL, "--plot", "x.png", status=2,
                           json_out=False)
    assert "pip install matplotlib" in output
    assert not (tmp_path / "x.png").exists()


def _importable(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False
