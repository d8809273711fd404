"""The comparison scripts in benchmarks/ that the results files quote run, on tiny sizes, and
print a row per size with a finite, positive number in every column. Nothing here asserts on a
time: these only keep the scripts from rotting as the library changes under them."""
import math
import re
from pathlib import Path

import pytest

from mpi_helpers import run_python, run_script

pytestmark = pytest.mark.mpi
BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def rows(output, first_column):
    """The table rows whose first field matches first_column, as lists of floats."""
    found = []
    for line in output.splitlines():
        fields = line.split()
        if fields and re.fullmatch(first_column, fields[0]):
            found.append([float(f) for f in fields[1:]])
    return found


def all_positive(values):
    return all(math.isfinite(v) and v > 0 for v in values)


# all_reduce: 4 bandwidths and 5 ratios; all_gather adds the streaming copy and stream/MPI
@pytest.mark.parametrize("args, columns", [(["all_reduce"], 9),
                                           (["all_gather", "--one-buffer"], 11)])
def test_copy_floor(args, columns):
    _, output = run_script(BENCHMARKS / "copy_floor.py", 2, *args, "-b", "64K", "-e", "256K",
                           "--blocks", "1")
    table = rows(output, r"\d+")
    assert len(table) == 2 and all(len(r) == columns and all_positive(r) for r in table), output


def test_all_gather_floor_is_copy_floor_all_gather():
    _, output = run_script(BENCHMARKS / "all_gather_floor.py", 2, "-b", "64K", "-e", "64K",
                           "--blocks", "1")
    assert output.startswith("all_gather, 2 ranks") and len(rows(output, r"\d+")) == 1, output


def test_small_calls_on_more_ranks_than_cores():
    _, output = run_script(BENCHMARKS / "small_calls.py", 3, "--iters", "20", "--blocks", "1")
    # name, our us per call, MPI's, and their ratio
    table = {m[0]: m[1:] for m in re.findall(r"^\s*(\w+)\s+(\S+)\s+MPI\s+(\S+)\s+ratio\s+(\S+)$",
                                              output, re.MULTILINE)}
    assert set(table) == {"barrier", "broadcast", "all_reduce"}, output
    for values in table.values():
        assert all_positive(float(f) for f in values), output


def test_auto_vs_fixed():
    _, output = run_script(BENCHMARKS / "auto_vs_fixed.py", 2, "all_gather", "-b", "64K",
                           "-e", "64K", "--blocks", "1")
    # size, a time per algorithm and auto's ("-" where one does not run), the fastest
    # algorithm's name, auto / fastest
    header = next(line.split() for line in output.splitlines() if line.split()[:1] == ["size"])
    rows = [line.split() for line in output.splitlines() if line.split()[:1] == ["65536"]]
    assert len(rows) == 1 and len(rows[0]) == len(header), output
    times = {name: float(t) for name, t in zip(header[1:-2], rows[0][1:-2]) if t != "-"}
    best, ratio = rows[0][-2], float(rows[0][-1])
    assert {"ring", "auto"} <= set(times) and all_positive(times.values()), output
    assert times[best] == min(t for name, t in times.items() if name != "auto"), output
    assert ratio == pytest.approx(times["auto"] / times[best], rel=0.01, abs=1e-3), output


def test_mpi_table_drives_the_bench():
    """mpi_table.py starts its own mpiexec jobs; run_python's session holds them all."""
    _, output = run_python([BENCHMARKS / "mpi_table.py", "broadcast", "--runs", "1",
                            "-b", "1K", "-e", "4K"])
    table = [line.split() for line in output.splitlines()
             if re.match(r"\s*\d+[KM]?\s+(one_shot|ring|direct)\s", line)]
    assert [r[0] for r in table] == ["1K", "4K"], output
    assert all(all_positive(float(f) for f in r[2:]) for r in table), output


@pytest.mark.parametrize("args, sizes", [
    (["all_reduce", "-b", "8", "-e", "1K"], [8, 32, 128, 512]),
    (["all_gather", "-b", "1K", "-e", "64K", "-f", "64", "--skew-us", "20"], [1024, 65536]),
    (["all_reduce", "-b", "64K", "-e", "64K", "--alloc", "--in-place"], [65536])])
def test_plain_loop(args, sizes):
    _, output = run_script(BENCHMARKS / "plain_loop.py", 2, *args, "--iters", "10", "--runs", "2")
    # size, dpcore's us, MPI's, their ratio, the ratios' range, the two cpu columns, and what
    # auto ran in each run: the 3 warm-up calls and the 10 timed ones
    table = re.findall(r"^\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)-(\S+)\s+(\S+)\s+(\S+)\s+(.+)$",
                       output, re.MULTILINE)
    assert [int(r[0]) for r in table] == sizes, output
    for row in table:
        assert all_positive(float(f) for f in row[1:8]), output
        runs = row[8].split("; ")
        assert len(runs) == 2, output
        for ran in runs:
            counts = re.findall(r"(one_shot|ring|direct) (\d+)", ran)
            assert sum(int(k) for _, k in counts) == 13, output


def test_spin_budget():
    _, output = run_script(BENCHMARKS / "spin_budget.py", 2, "--spin-us", "0,50", "--iters", "10",
                           "--rounds", "2", "--skew-us", "10", "--busy", "1")
    # the budget (or MPI), us per call, MPI's time over it, rank 0's CPU us per call
    table = {m[0]: m[1:] for m in re.findall(r"^\s*(MPI|\d+ us)\s+(\S+)\s+(\S+)\s+(\S+)$", output,
                                              re.MULTILINE)}
    assert set(table) == {"MPI", "0 us", "50 us"}, output
    assert all(all_positive(float(f) for f in row) for row in table.values()), output
    assert float(table["MPI"][1]) == 1.0, output


def test_late_call():
    _, output = run_script(BENCHMARKS / "late_call.py", 2, "--calls", "50", "--runs", "2",
                           "--skew-us", "5")
    # each layer of the call path and MPI: the late rank's median us in each run
    table = rows(output, r"run|_launch|choose|entry|reduce|MPI")
    assert len(table) == 6 and all(len(r) == 2 and all_positive(r) for r in table), output
