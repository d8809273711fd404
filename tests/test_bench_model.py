"""The bench beside the cost model: pred_us and model_err% columns, the algorithm auto ran, --plot.

A synthetic parameter file (known alpha and beta) is passed with --model, so every prediction
can be recomputed here exactly; nothing asserts on a measured time.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from dpcore.dtypes import ALGORITHM_NAMES
from dpcore.settings import Settings
from dpcore.bench.table import time_text
from dpcore.cost import Params, auto, predict, save

SYNTHETIC = {"one_shot": Params(alpha=1e-6, beta=1e-9), "ring": Params(alpha=1e-6, beta=1e-9)}
SMALL = ["-b", "256", "-e", "64K", "-f", "16", "-n", "2", "-w", "1"]
needs_mpiexec = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")


def bench(tmp_path, ranks, *args, script=None, expect_status=0, json_out=True):
    """Run the benchmark with an empty cache folder (no fitted file unless --model says so);
    returns (stdout + stderr, the --json document or None)."""
    out = tmp_path / "bench.json"
    env = dict(os.environ, DPCORE_TIMEOUT="60", XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("DPCORE_ONE_SHOT_MAX", None)
    cmd = [sys.executable] + ([script] if script else ["-m", "dpcore.bench"]) + list(args)
    cmd += ["--json", str(out)] if json_out else []
    if ranks:
        cmd = ["mpiexec", "-n", str(ranks)] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert proc.returncode == expect_status, proc.stdout + proc.stderr
    doc = json.loads(out.read_text()) if json_out and expect_status == 0 else None
    return proc.stdout + proc.stderr, doc


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "synthetic.json"
    save(str(path), SYNTHETIC, ranks=2, transport="shm", dtype="float32")
    return path


def header_names(stdout):
    return next(line for line in stdout.splitlines()
                if line.startswith("#") and "busbw" in line).split()


def auto_rule_holds(rows, n):
    """The algorithm reported for -a auto is one the communicator's rule gives: one_shot below
    the default switch (dpcore.cost.auto.ONE_SHOT_MAX) or the fitted crossover of the synthetic
    model, and above it the ring, or direct (the tuner's other arm)."""
    default = ["one_shot" if r["size"] <= auto.ONE_SHOT_MAX else "ring" for r in rows]
    auto.use_params(SYNTHETIC, "test", "shm")
    try:
        fitted = [auto.auto_algorithm("all_reduce", r["size"], n, Settings().one_shot_bytes)[0]
                  for r in rows]
    finally:
        auto.forget()
    used = [r["algo_used"].replace("direct", "ring") for r in rows]
    return used in (default, fitted)


@needs_mpiexec
def test_model_columns_and_plot(tmp_path, model_file):
    plot = tmp_path / "busbw.png"
    has_matplotlib = _importable("matplotlib")
    extra = ["--plot", str(plot)] if has_matplotlib else []
    stdout, doc = bench(tmp_path, 2, "all_reduce", *SMALL, "--compare", "mpi",
                        "--model", str(model_file), *extra)
    names = header_names(stdout)
    assert {"algo", "pred_us", "model_err%", "#wrong", "mpi"} <= set(names), names
    assert f"# model: {model_file}" in stdout and "# Model error" in stdout
    assert doc["wrong"] == 0 and doc["model"] == str(model_file)
    assert len(doc["rows"]) == 3
    for row in doc["rows"]:
        want = predict("all_reduce", row["algo_used"], row["size"], 2, SYNTHETIC) * 1e6
        assert row["pred_us"] == pytest.approx(want)
        assert row["model_err%"] == pytest.approx(
            (row["pred_us"] - row["ip_time_us"]) / row["ip_time_us"] * 100)
        printed = next(line.split() for line in stdout.splitlines()
                       if line.split()[:2] == [str(row["size"]), str(row["count"])])
        assert printed[-3:] == [row["algo_used"], time_text(row["pred_us"]),
                                f"{row['model_err%']:+.0f}"]
    assert auto_rule_holds(doc["rows"], 2), doc["rows"]
    if has_matplotlib:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"# plot: {plot}" in stdout


@needs_mpiexec
def test_a_fixed_algorithm_is_what_is_predicted(tmp_path, model_file):
    _, doc = bench(tmp_path, 2, "all_gather", "-b", "1K", "-e", "16K", "-f", "16", "-n", "1",
                   "-w", "0", "-a", "ring", "--model", str(model_file))
    for row in doc["rows"]:
        assert row["algo_used"] == "ring"
        assert row["pred_us"] == pytest.approx(
            predict("all_gather", "ring", row["size"], 2, SYNTHETIC) * 1e6)


def test_without_a_fit_a_hint_and_no_columns(tmp_path):
    stdout, doc = bench(tmp_path, 0, "all_reduce", *SMALL)
    assert "pred_us" not in header_names(stdout) and "algo" in header_names(stdout)
    assert "# no fitted cost model: `mpiexec -n 2 python -m dpcore.cost fit`" in stdout
    for row in doc["rows"]:
        assert "pred_us" not in row and "model_err%" not in row
        assert row["algo_used"] in ALGORITHM_NAMES.values()
    assert "model" not in doc


def test_the_default_fit_file_is_used(tmp_path):
    save(str(tmp_path / "cache" / "dpcore" / "cost.json"), SYNTHETIC, ranks=2, transport="shm")
    stdout, doc = bench(tmp_path, 0, "broadcast", *SMALL)
    assert "pred_us" in header_names(stdout)
    assert all("pred_us" in row for row in doc["rows"])


def test_a_missing_model_file_is_an_error(tmp_path):
    stdout, _ = bench(tmp_path, 0, "all_reduce", *SMALL, "--model", "nothing.json",
                      expect_status=2)
    assert "--model nothing.json: no such file" in stdout


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path):
    script = tmp_path / "no_matplotlib.py"
    script.write_text("import sys\nsys.modules['matplotlib'] = None\n"
                      "from dpcore.bench import cli\ncli.run()\n")
    stdout, _ = bench(tmp_path, 0, "all_reduce", *SMALL, "--plot", "x.png",
                      script=str(script), expect_status=2, json_out=False)
    assert "pip install matplotlib" in stdout
    assert not (tmp_path / "x.png").exists()


def _importable(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False
