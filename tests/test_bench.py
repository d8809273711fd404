"""The nccl-tests style benchmark: runs under mpiexec, prints nccl-tests' columns, #wrong is 0.

Each multi-rank case launches `mpiexec -n K python -m dpcore.bench ...` on small sizes and reads
the --json rows; nothing here asserts on a time.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from dpcore.bench.collectives import COLLECTIVES
from dpcore.dtypes import bfloat16
from dpcore.bench.options import parse_size
from test_direct import ptrace_allows_siblings

SMALL = ["-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"]
COLUMNS = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"]
FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
           "all_gather": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}
needs_mpiexec = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")


def bench(tmp_path, ranks, *args, script=None, expect_status=0, env=None):
    """Run the benchmark (under mpiexec when ranks > 0); returns (stdout, json document)."""
    out = tmp_path / "bench.json"
    env = dict(os.environ, DPCORE_TIMEOUT="60", **(env or {}))
    cmd = [sys.executable] + ([script] if script else ["-m", "dpcore.bench"])
    cmd += [*args, "--json", str(out)]
    if ranks:
        cmd = ["mpiexec", "-n", str(ranks)] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert proc.returncode == expect_status, proc.stdout + proc.stderr
    return proc.stdout, json.loads(out.read_text())


def check_rows(doc, stdout, collective, ranks, compare=True):
    names = next(line for line in stdout.splitlines() if line.startswith("#") and "busbw" in line)
    for column in COLUMNS:
        assert column in names.split(), names
    assert names.split().count("#wrong") == 2  # out-of-place, in-place
    if compare:
        assert "mpi time" in names and "mpi busbw" in names and "ratio" in names
    assert "# Avg bus bandwidth" in stdout and "# Out of bounds values : 0 OK" in stdout
    assert doc["collective"] == collective and doc["nranks"] == ranks and doc["wrong"] == 0
    assert doc["rows"], stdout
    for row in doc["rows"]:
        assert row["nranks"] == ranks and row["algo"] == doc["algo"]
        for p in ("oop", "ip"):
            assert row[f"{p}_wrong"] == 0, row
            assert row[f"{p}_time_us"] > 0
            assert row[f"{p}_algbw"] == pytest.approx(row["size"] / row[f"{p}_time_us"] / 1e3)
            factor = FACTORS[collective](ranks)
            assert row[f"{p}_busbw"] == pytest.approx(row[f"{p}_algbw"] * factor)
            if compare and row[f"{p}_mpi_time_us"] is not None:
                assert row[f"{p}_ratio"] == pytest.approx(row[f"{p}_mpi_time_us"]
                                                          / row[f"{p}_time_us"])
    # each size row appears in the printed table
    for row in doc["rows"]:
        assert any(line.split()[:2] == [str(row["size"]), str(row["count"])]
                   for line in stdout.splitlines()), row


@needs_mpiexec
@pytest.mark.parametrize("collective, dtype, op", [
    ("all_reduce", "float32", "sum"),
    ("reduce_scatter", "float16", "avg"),
    ("all_gather", "int8", "sum"),
    pytest.param("broadcast", "bfloat16", "sum", marks=pytest.mark.skipif(
        bfloat16 is None, reason="bfloat16 needs ml_dtypes")),
])
def test_two_ranks(tmp_path, collective, dtype, op):
    extra = ["-r", "1"] if collective == "broadcast" else []
    stdout, doc = bench(tmp_path, 2, collective, *SMALL, "-d", dtype, "-o", op, *extra,
                        "--compare", "mpi")
    check_rows(doc, stdout, collective, 2)
    assert {r["type"] for r in doc["rows"]} == {dtype}
    row = doc["rows"][-1]
    if collective == "reduce_scatter":  # float16 has no MPI reduction
        assert row["ip_mpi_time_us"] is None and "n/a" in stdout
        assert row["redop"] == "avg"
    else:
        assert row["ip_mpi_time_us"] > 0 and row["ip_ratio"] > 0
    if collective == "broadcast":
        assert row["root"] == 1 and row["redop"] == "none"


@needs_mpiexec
def test_every_dtype_and_op(tmp_path):
    stdout, doc = bench(tmp_path, 2, "all_reduce", "-b", "8", "-e", "4K", "-f", "64",
                        "-n", "1", "-w", "0", "-d", "all", "-o", "all")
    check_rows(doc, stdout, "all_reduce", 2, compare=False)
    combos = {(r["type"], r["redop"]) for r in doc["rows"]}
    assert ("int8", "prod") in combos and ("float16", "avg") in combos
    assert ("int32", "avg") not in combos  # avg needs a floating dtype


@needs_mpiexec
def test_three_ranks_uneven(tmp_path):
    # nccl-tests' sizes: reduce_scatter sends n * (count // n) elements
    stdout, doc = bench(tmp_path, 3, "reduce_scatter", *SMALL, "-d", "int32", "-o", "max",
                        "--compare", "mpi", "--repeat", "2")
    check_rows(doc, stdout, "reduce_scatter", 3)
    for row in doc["rows"]:
        assert row["size"] == row["count"] * 3 * 4


@needs_mpiexec
@pytest.mark.parametrize("placement", [["--one-buffer"], ["-R", "1"]])
def test_buffer_placements_check_clean(tmp_path, placement):
    # one buffer at -e's size for every row (nccl-tests' layout), or comm.alloc's buffers:
    # every row still checks out exactly, uneven shards included, beside MPI
    stdout, doc = bench(tmp_path, 3, "all_gather", *SMALL, "--compare", "mpi", *placement)
    check_rows(doc, stdout, "all_gather", 3)


@needs_mpiexec
def test_perf_script(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "all_gather_perf.py")
    stdout, doc = bench(tmp_path, 2, "-b", "1K", "-e", "8K", "-f", "8", "-n", "1", "-w", "0",
                        "-a", "ring", script=os.path.abspath(script))
    check_rows(doc, stdout, "all_gather", 2, compare=False)
    assert doc["algo"] == "ring"


@needs_mpiexec
@pytest.mark.skipif(not ptrace_allows_siblings(), reason="ranks may not read each other's memory")
@pytest.mark.parametrize("coll", ["all_gather", "broadcast"])
def test_direct_algorithm_and_auto_past_its_threshold(tmp_path, coll):
    """-a direct runs where the ranks may read each other's memory; auto reports what ran:
    direct from _C.FIXED_DIRECT_MIN with DPCORE_TUNE=0, and with the tuner the majority of the
    in-place calls, which for a lone size class of 20 calls is the faster of its two runs."""
    from dpcore import _C

    stdout, doc = bench(tmp_path, 2, coll, "-b", "1K", "-e", "8K", "-f", "8", "-n", "1", "-w",
                        "0", "-a", "direct", "--compare", "mpi")
    check_rows(doc, stdout, coll, 2)
    assert {row["algo_used"] for row in doc["rows"]} == {"direct"}
    big = _C.FIXED_DIRECT_MIN
    fixed = ["-b", str(big), "-e", str(big), "-n", "1", "-w", "0"]
    stdout, doc = bench(tmp_path, 2, coll, *fixed, env={"DPCORE_TUNE": "0"})
    check_rows(doc, stdout, coll, 2, compare=False)
    assert doc["rows"][0]["algo_used"] == "direct"
    stdout, doc = bench(tmp_path, 2, coll, "-b", str(big), "-e", str(big), "-n", "20")
    check_rows(doc, stdout, coll, 2, compare=False)
    assert doc["rows"][0]["ip_algo"] in ("ring", "direct")


def test_one_rank_without_mpiexec(tmp_path):
    stdout, doc = bench(tmp_path, 0, "all_reduce", *SMALL, "--compare", "mpi")
    check_rows(doc, stdout, "all_reduce", 1)


def test_wrong_results_are_counted(tmp_path):
    """A collective that does nothing leaves every (poisoned) output element wrong; in place
    on one rank, doing nothing is the right answer."""
    script = tmp_path / "broken.py"
    script.write_text(
        "from dpcore.bench import cli, collectives\n"
        "collectives.AllReduce.run = staticmethod(lambda comm, send, recv, case: None)\n"
        "cli.run()\n")
    stdout, doc = bench(tmp_path, 0, "all_reduce", "-b", "64", "-e", "256", "-f", "4",
                        "-n", "1", "-w", "0", script=str(script), expect_status=1)
    assert [(r["oop_wrong"], r["ip_wrong"]) for r in doc["rows"]] == [(16, 0), (64, 0)]
    assert "FAILED" in stdout


def test_sizes_and_factors():
    assert [parse_size(s) for s in ("8", "1K", "64M", "1G", "2k")] == [8, 1024, 64 << 20,
                                                                         1 << 30, 2048]
    assert COLLECTIVES["reduce_scatter"].sizes(10, 3) == (9, 3, 3)
    assert COLLECTIVES["all_gather"].sizes(10, 3) == (3, 9, 3)
    assert COLLECTIVES["all_reduce"].sizes(10, 3) == (10, 10, 10)
    for name, factor in FACTORS.items():
        assert COLLECTIVES[name].bus_factor(4) == pytest.approx(factor(4))
