"""The nccl-tests style benchmark: runs under mpiexec, prints nccl-tests' columns, #wrong is 0.

Each multi-rank case launches `mpiexec -n K python -m dpcore.bench ...` on small sizes and reads
the --json rows; the one-rank cases run its main() in the test process, but for one run of the
command alone. Nothing here asserts on a time.
"""
import json
import os

import numpy as np
import pytest

from dpcore import _C
from dpcore.bench import cli, collectives
from dpcore.bench.collectives import COLLECTIVES, TESTS
from dpcore.bench.floor import achieved, floor_bytes
from dpcore.bench.options import parse_size
from dpcore.cost import auto
from dpcore.cost.formulas import ring
from dpcore.dtypes import bfloat16_dtype
from mpi_helpers import run_mpi, run_python
from test_direct import ptrace_allows_siblings

SMALL = ["-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"]
COLUMNS = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"]
# nccl-tests' doc/PERFORMANCE.md and src/<test>.cu, restated here to check the table against
FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
           "all_gather": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0,
           "reduce": lambda n: 1.0, "gather": lambda n: (n - 1) / n,
           "scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
           "sendrecv": lambda n: 1.0}


def bench(tmp_path, ranks, *args, script=None, status=0, env=None, json_out=True):
    """Run the benchmark as a command in tmp_path: under mpiexec -n ranks, or alone when ranks
    is 0; fail unless it exits with `status`. An empty cache folder (no fitted cost model unless
    a test writes one there), no DPCORE_ONE_SHOT_MAX. Returns (stdout and stderr, the --json
    document or None where none was written)."""
    out = tmp_path / "bench.json"
    out.unlink(missing_ok=True)
    argv = [script] if script else ["-m", "dpcore.bench"]
    argv += [*args, *(["--json", out] if json_out else [])]
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "DPCORE_ONE_SHOT_MAX": None, **(env or {})}
    kwargs = {"env": env, "cwd": tmp_path, "status": status}
    _, output = run_mpi(ranks, argv, **kwargs) if ranks else run_python(argv, **kwargs)
    return output, json.loads(out.read_text()) if out.exists() else None


def bench_here(tmp_path, capsys, *args, status=0, json_out=True):
    """bench(tmp_path, 0, *args) without starting a process: the benchmark's main() runs on one
    rank in this one (MPI initialises here, as a singleton), which saves an interpreter's start
    and imports; test_one_rank_without_mpiexec runs the command itself. The cost model the run
    loaded is forgotten after it, so no other test sees it."""
    out = tmp_path / "bench.json"
    out.unlink(missing_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        mp.chdir(tmp_path)
        auto.forget()
        try:
            got = cli.main([*map(str, args), *(["--json", str(out)] if json_out else [])])
        except SystemExit as e:  # the parser's errors
            got = e.code
        finally:
            auto.forget()
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert got == status, f"dpcore.bench {' '.join(map(str, args))} returned {got}:\n{output}"
    return output, json.loads(out.read_text()) if out.exists() else None


def check_rows(doc, output, collective, ranks, compare=True, factor=None):
    names = next(line for line in output.splitlines() if line.startswith("#") and "busbw" in line)
    for column in COLUMNS:
        assert column in names.split(), names
    assert names.split().count("#wrong") == 2  # out-of-place, in-place
    if compare:
        assert "mpi time" in names and "mpi busbw" in names and "ratio" in names
    assert "# Avg bus bandwidth" in output and "# Out of bounds values : 0 OK" in output
    assert doc["collective"] == collective and doc["nranks"] == ranks and doc["wrong"] == 0
    assert doc["rows"], output
    for row in doc["rows"]:
        assert row["nranks"] == ranks
        if doc["algo"] != "auto":  # a fixed algorithm runs every call, timed or checking
            assert row["oop_algo"] == row["ip_algo"] == doc["algo"], row
        for p in ("oop", "ip"):
            assert row[f"{p}_wrong"] == 0, row
            assert row[f"{p}_time_us"] > 0
            assert row[f"{p}_algbw"] == pytest.approx(row["size"] / row[f"{p}_time_us"] / 1e3)
            want = FACTORS[collective](ranks) if factor is None else factor
            assert row[f"{p}_busbw"] == pytest.approx(row[f"{p}_algbw"] * want)
            if compare and row[f"{p}_mpi_time_us"] is not None:
                assert row[f"{p}_ratio"] == pytest.approx(row[f"{p}_mpi_time_us"]
                                                          / row[f"{p}_time_us"])
    # each size row appears in the printed table
    for row in doc["rows"]:
        assert any(line.split()[:2] == [str(row["size"]), str(row["count"])]
                   for line in output.splitlines()), row


@pytest.mark.mpi
@pytest.mark.parametrize("collective, dtype, op", [
    ("all_reduce", "float32", "sum"),
    ("reduce_scatter", "float16", "avg"),
    ("all_gather", "int8", "sum"),
    pytest.param("broadcast", "bfloat16", "sum", marks=pytest.mark.skipif(
        bfloat16_dtype() is None, reason="bfloat16 needs ml_dtypes")),
])
def test_two_ranks(tmp_path, collective, dtype, op):
    extra = ["-r", "1"] if collective == "broadcast" else []
    output, doc = bench(tmp_path, 2, collective, *SMALL, "-d", dtype, "-o", op, *extra,
                        "--compare", "mpi")
    check_rows(doc, output, collective, 2)
    assert {r["type"] for r in doc["rows"]} == {dtype}
    row = doc["rows"][-1]
    if collective == "reduce_scatter":  # float16 has no MPI reduction
        assert row["ip_mpi_time_us"] is None and "n/a" in output
        assert row["redop"] == "avg"
    else:
        assert row["ip_mpi_time_us"] > 0 and row["ip_ratio"] > 0
    if collective == "broadcast":
        assert row["root"] == 1 and row["redop"] == "none"


@pytest.mark.mpi
@pytest.mark.parametrize("collective, ranks, dtype, op, root", [
    ("reduce", 3, "float32", "max", 2),
    ("reduce", 2, "int32", "sum", 0),
    ("gather", 3, "int8", "sum", 1),
    ("scatter", 3, "float64", "sum", 2),
    ("alltoall", 3, "float32", "sum", 0),
    ("alltoall", 2, "float16", "sum", 0),
    ("sendrecv", 3, "int64", "sum", 0),
])
def test_the_rest_of_nccl_tests_beside_mpi(tmp_path, collective, ranks, dtype, op, root):
    # reduce_perf, gather_perf, scatter_perf, alltoall_perf, sendrecv_perf: exact results on
    # every rank that receives something, MPI's own call timed on the same buffers
    output, doc = bench(tmp_path, ranks, collective, *SMALL, "-d", dtype, "-o", op,
                        "-r", str(root), "--compare", "mpi")
    name = "all_to_all" if collective == "alltoall" else collective
    check_rows(doc, output, name, ranks, factor=FACTORS[collective](ranks))
    row = doc["rows"][-1]
    assert row["ip_mpi_time_us"] > 0 and row["ip_ratio"] > 0
    assert row["root"] == (root if TESTS[collective].rooted else -1)
    assert row["redop"] == (op if collective == "reduce" else "none")
    per_rank = row["size"] // np.dtype(dtype).itemsize // ranks
    if collective in ("gather", "scatter", "alltoall"):  # nccl-tests' count: per rank
        assert row["count"] == per_rank
    if collective in ("scatter", "alltoall", "sendrecv"):
        assert "does not run in place: both columns time separate buffers" in output
    if collective == "sendrecv":
        assert row["algo_used"] == "p2p"


def test_sendrecv_needs_two_ranks(tmp_path, capsys):
    output, _ = bench_here(tmp_path, capsys, "sendrecv", "-b", "8", "-e", "8", status=2,
                           json_out=False)
    assert "run it on 2 ranks or more" in output


@pytest.mark.mpi
def test_every_dtype_and_op(tmp_path):
    output, doc = bench(tmp_path, 2, "all_reduce", "-b", "8", "-e", "4K", "-f", "64",
                        "-n", "1", "-w", "0", "-d", "all", "-o", "all")
    check_rows(doc, output, "all_reduce", 2, compare=False)
    combos = {(r["type"], r["redop"]) for r in doc["rows"]}
    assert ("int8", "prod") in combos and ("float16", "avg") in combos
    assert ("uint32", "sum") in combos and ("uint64", "prod") in combos
    assert ("int32", "avg") not in combos  # avg needs a floating dtype


@pytest.mark.mpi
def test_three_ranks_uneven(tmp_path):
    # nccl-tests' sizes: reduce_scatter sends n * (count // n) elements
    output, doc = bench(tmp_path, 3, "reduce_scatter", *SMALL, "-d", "int32", "-o", "max",
                        "--compare", "mpi", "--repeat", "2")
    check_rows(doc, output, "reduce_scatter", 3)
    for row in doc["rows"]:
        assert row["size"] == row["count"] * 3 * 4


@pytest.mark.mpi
@pytest.mark.parametrize("placement", [["--one-buffer"], ["-R", "1"]])
def test_buffer_placements_check_clean(tmp_path, placement):
    # one buffer at -e's size for every row (nccl-tests' layout), or comm.alloc's buffers:
    # every row still checks out exactly, uneven shards included, beside MPI
    output, doc = bench(tmp_path, 3, "all_gather", *SMALL, "--compare", "mpi", *placement)
    check_rows(doc, output, "all_gather", 3)


@pytest.mark.mpi
def test_perf_script(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "all_gather_perf.py")
    output, doc = bench(tmp_path, 2, "-b", "1K", "-e", "8K", "-f", "8", "-n", "1", "-w", "0",
                        "--algo", "ring", script=os.path.abspath(script))
    check_rows(doc, output, "all_gather", 2, compare=False)
    assert doc["algo"] == "ring"


@pytest.mark.mpi
@pytest.mark.skipif(not ptrace_allows_siblings(), reason="ranks may not read each other's memory")
@pytest.mark.parametrize("coll", ["all_gather", "broadcast"])
def test_direct_algorithm_and_auto_past_its_threshold(tmp_path, coll):
    """--algo direct runs where the ranks may read each other's memory; auto reports what ran:
    direct from _C.FIXED_DIRECT_MIN with DPCORE_TUNE=0, and with the tuner the algorithm that
    ran most of the in-place timed calls, after the tuner's trial of the other."""
    output, doc = bench(tmp_path, 2, coll, "-b", "1K", "-e", "8K", "-f", "8", "-n", "1", "-w",
                        "0", "--algo", "direct", "--compare", "mpi")
    check_rows(doc, output, coll, 2)
    assert {row["algo_used"] for row in doc["rows"]} == {"direct"}
    big = str(_C.FIXED_DIRECT_MIN)
    output, doc = bench(tmp_path, 2, coll, "-b", big, "-e", big, "-n", "1", "-w", "0",
                        env={"DPCORE_TUNE": "0"})
    check_rows(doc, output, coll, 2, compare=False)
    assert doc["rows"][0]["algo_used"] == "direct"
    trace = tmp_path / "trace.json"
    output, doc = bench(tmp_path, 2, coll, "-b", big, "-e", big, "-n", "20",
                        env={"DPCORE_TRACE": str(trace)})
    check_rows(doc, output, coll, 2, compare=False)
    ran = algorithms_run(trace, coll)
    # A kind of buffer's first calls (the warm-up's) run the fixed choice, direct from
    # FIXED_DIRECT_MIN, then the tuner tries the ring ...
    run = _C.TUNER_SETTLE_CALLS // 3
    assert ran[:run + 1] == ["direct"] * run + ["ring"], ran
    # ... and the row reports the one most of the 20 in-place timed calls ran: they come last
    # but for -c 1's checking call.
    timed = ran[-21:-1]
    assert timed.count(doc["rows"][0]["ip_algo"]) * 2 >= len(timed), (doc["rows"][0], ran)


def algorithms_run(trace, coll):
    """The algorithm of each `coll` call rank 0 ran, in order, from its DPCORE_TRACE file: a
    ring call has step spans (tid 1) under its sequence number, a direct call none."""
    spans = [e for e in json.loads(trace.read_text())["traceEvents"]
             if e["ph"] == "X" and e["pid"] == 0]
    with_steps = {e["args"]["seq"] for e in spans if e["tid"] == 1}
    calls = sorted(e["args"]["seq"] for e in spans if e["tid"] == 0 and e["name"] == coll)
    return ["ring" if seq in with_steps else "direct" for seq in calls]


def test_one_rank_without_mpiexec(tmp_path):
    output, doc = bench(tmp_path, 0, "all_reduce", *SMALL, "--compare", "mpi")
    check_rows(doc, output, "all_reduce", 1)


def test_wrong_results_are_counted(tmp_path, capsys, monkeypatch):
    """A collective that does nothing leaves every (poisoned) output element wrong; in place
    on one rank, doing nothing is the right answer."""
    monkeypatch.setattr(collectives.AllReduce, "run",
                        staticmethod(lambda comm, send, recv, case: None))
    output, doc = bench_here(tmp_path, capsys, "all_reduce", "-b", "64", "-e", "256", "-f", "4",
                             "-n", "1", "-w", "0", status=1)
    assert [(r["oop_wrong"], r["ip_wrong"]) for r in doc["rows"]] == [(16, 0), (64, 0)]
    assert "FAILED" in output


def test_sizes_and_factors():
    assert [parse_size(s) for s in ("8", "1K", "64M", "1G", "2k")] == [8, 1024, 64 << 20,
                                                                         1 << 30, 2048]
    assert COLLECTIVES["reduce_scatter"].sizes(10, 3) == (9, 3, 3)
    assert COLLECTIVES["all_gather"].sizes(10, 3) == (3, 9, 3)
    assert COLLECTIVES["all_reduce"].sizes(10, 3) == (10, 10, 10)
    # nccl-tests: gather sends count/n and receives n of those, scatter the reverse, alltoall
    # n chunks of count/n each way, reduce and sendrecv count
    assert TESTS["reduce"].sizes(10, 3) == TESTS["sendrecv"].sizes(10, 3) == (10, 10, 10)
    assert TESTS["gather"].sizes(10, 3) == (3, 9, 3)
    assert TESTS["scatter"].sizes(10, 3) == (9, 3, 3)
    assert TESTS["alltoall"].sizes(10, 3) == (9, 9, 3)
    for name, factor in FACTORS.items():
        assert TESTS[name].bus_factor(4) == pytest.approx(factor(4))
    assert TESTS["alltoall"] is COLLECTIVES["all_to_all"]


@pytest.mark.mpi
def test_copy_floor_beside_each_row(tmp_path):
    """--floor: each in-place block alternates with a copy of the floor's bytes on every rank
    at once, and the row gives the copy's time, its bandwidth and the share of it reached."""
    output, doc = bench(tmp_path, 2, "all_reduce", *SMALL, "--floor", "--compare", "mpi")
    check_rows(doc, output, "all_reduce", 2)
    names = next(line for line in output.splitlines() if "#wrong" in line).split()
    assert ["floor", "copy", "bw", "reached"] == names[names.index("floor"):][:4], names
    assert doc["floor"] is True and doc["device"] == "cpu"
    for row in doc["rows"]:
        assert row["floor_bytes"] == floor_bytes("all_reduce", 2, row["size"]) > 0
        assert row["floor_time_us"] > 0
        assert row["floor_copy_gbps"] == pytest.approx(row["floor_bytes"]
                                                       / row["floor_time_us"] / 1e3)
        assert row["ip_floor%"] == pytest.approx(row["floor_time_us"] / row["ip_time_us"] * 100)
    assert "# Copy floor reached   : median" in output


def test_copy_floor_on_one_rank_moves_nothing(tmp_path, capsys):
    output, doc = bench_here(tmp_path, capsys, "broadcast", "-b", "1K", "-e", "1K", "-n", "1",
                             "-w", "0", "--floor")
    row, = doc["rows"]
    assert (row["floor_bytes"], row["floor_time_us"], row["ip_floor%"]) == (0, None, None)
    line = next(line for line in output.splitlines() if line.split()[:1] == ["1024"])
    assert line.split()[-4:-1] == ["n/a"] * 3  # floor, copy bw, reached; then algo


@pytest.mark.parametrize("args, message", [
    (["--compare", "nccl"], "--compare nccl times NCCL on GPU buffers: add --device cuda"),
    (["--device", "cuda", "--compare", "mpi"], "--compare mpi needs host buffers"),
])
def test_device_options_that_cannot_go_together(tmp_path, capsys, args, message):
    output, _ = bench_here(tmp_path, capsys, "all_reduce", *args, status=2)
    assert message in output


def test_floor_bytes_are_the_rings_bytes_through_memory():
    """A copy reads and writes each byte; the ring reads and writes every byte it receives and
    reads every byte it reduces once more: the floor copies received + reduced / 2."""
    mib = 1 << 20
    assert floor_bytes("all_reduce", 2, 64 * mib) == 80 * mib  # 5/2 x 1/2 x S
    assert floor_bytes("reduce_scatter", 4, 4096) == 4608      # 3/2 x 3/4 x S
    assert floor_bytes("all_gather", 4, 4096) == 3072          # 3/4 x S
    assert floor_bytes("broadcast", 3, 3000) == 2000           # 2 of 3 ranks receive S
    for coll in COLLECTIVES:
        assert floor_bytes(coll, 1, 4096) == 0
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):  # the cost model's ring
        for n in range(1, 9):
            cost = ring(coll, mib, n)
            assert floor_bytes(coll, n, mib) == round(cost.nbytes + cost.reduced / 2), (coll, n)
    assert achieved(1.0, 4.0) == 0.25
    assert achieved(None, 4.0) is None and achieved(1.0, None) is None


@pytest.mark.parametrize("args, why", [
    (["-b", "0", "-e", "64"], "-b"),       # used to multiply 0 by -f forever
    (["-b", "1Q"], "1Q"),
    (["-f", "0"], "-f"),
])
def test_sizes_it_cannot_sweep_are_refused(tmp_path, capsys, args, why):
    output, _ = bench_here(tmp_path, capsys, "all_reduce", *args, status=2, json_out=False)
    assert why in output, output


def test_json_into_a_missing_folder_is_refused_before_the_run(tmp_path, capsys):
    output, _ = bench_here(tmp_path, capsys, "all_reduce", "-b", "8", "-e", "8", "--json",
                           str(tmp_path / "no-such-folder" / "out.json"), status=2,
                           json_out=False)
    assert "no-such-folder" in output and "#wrong" not in output, output

