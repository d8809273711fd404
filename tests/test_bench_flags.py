"""nccl-tests' own flags in the bench (its src/common.cu): what each means, checked where that
can be seen without a launch, and in one mpiexec -n 2 run that takes several at once; and the
GPU-only ones, refused by name."""
import csv

import pytest

from dpcore.bench.blocks import timed_block
from dpcore.bench.gpu_only import GPU_ONLY
from dpcore.bench.options import parser
from dpcore.bench.table import time_text
from test_bench import bench, bench_here


@pytest.mark.mpi
def test_nccl_tests_flags_at_two_ranks(tmp_path):
    """-r all: a sweep per root, in nccl-tests' order; -N 2: each sweep twice; -m 2 and -z 1:
    two calls an iteration, each waited for; -C 1: the time column is rank 0's CPU time;
    -J FILE.csv: every row as CSV beside --json; a 64-bit unsigned dtype reduced exactly."""
    output, doc = bench(tmp_path, 2, "reduce", "-b", "64", "-e", "512", "-f", "8", "-n", "1",
                        "-w", "0", "-r", "all", "-N", "2", "-m", "2", "-z", "1", "-C", "1",
                        "-d", "uint64", "-o", "prod", "-J", "rows.csv")
    assert [(r["root"], r["cycle"], r["size"]) for r in doc["rows"]] == [
        (root, cycle, size) for root in (0, 1) for cycle in (0, 1) for size in (64, 512)]
    assert doc["wrong"] == 0 and {r["type"] for r in doc["rows"]} == {"uint64"}
    printed = [line.split() for line in output.splitlines() if "uint64" in line.split()]
    assert len(printed) == len(doc["rows"])
    for row, line in zip(doc["rows"], printed):  # the rows, in the order printed
        assert row["oop_wrong"] == row["ip_wrong"] == 0 and row["ip_cputime_us"] > 0
        assert line[:6] == [str(row["size"]), str(row["count"]), "uint64", "prod",
                            str(row["root"]), time_text(row["oop_cputime_us"])]
    assert "cputime" in next(line for line in output.splitlines() if "#wrong" in line)
    assert "agg iters: 2" in output and "blocking: 1" in output and "cycles: 2" in output
    with open(tmp_path / "rows.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["root"]), int(r["size"])) for r in rows] == [
        (r["root"], r["size"]) for r in doc["rows"]]


def test_flags_parse_as_nccl_tests_reads_them():
    args = parser().parse_args(["all_reduce", "-m", "3", "-z", "1", "-N", "0", "-T", "30",
                                "-C", "1", "-r", "all", "-J", "out.json", "-d", "uint32"])
    assert (args.agg_iters, args.blocking, args.run_cycles, args.timeout) == (3, True, 0, 30)
    assert args.report_cputime and args.root is None and args.datatype == ["uint32"]
    assert args.output_file == ("json", "out.json")
    defaults = parser().parse_args(["all_reduce"])
    assert (defaults.agg_iters, defaults.blocking, defaults.run_cycles, defaults.timeout,
            defaults.report_cputime, defaults.root) == (1, False, 1, 0, False, 0)
    assert {"uint32", "uint64"} <= set(parser().parse_args(["all_reduce", "-d", "all"]).datatype)


def test_timed_block_aggregates_and_blocks():
    """-m: iters x agg calls, the time per call; -z: a barrier after each call, and the device
    waited for first; -C's time stops before the last wait."""
    class World:
        barriers = 0

        def Barrier(self):
            World.barriers += 1

        def allreduce(self, value, op=None):
            return value

    calls, waits = [], []
    wall, cpu = timed_block(World(), lambda: calls.append(1), 3, 3, lambda: waits.append(1),
                            agg=2, blocking=True)
    assert len(calls) == 6 and World.barriers == 1 + 6 and len(waits) == 1 + 6 + 1
    assert 0 < cpu <= wall
    World.barriers = 0
    timed_block(World(), lambda: None, 3)
    assert World.barriers == 1


@pytest.mark.parametrize("flag, long", [(s, lg) for s, lg, _ in GPU_ONLY])
def test_gpu_only_flags_are_refused_by_name(tmp_path, capsys, flag, long):
    output, _ = bench_here(tmp_path, capsys, "all_reduce", flag, "1", status=2, json_out=False)
    assert f"{flag}/{long} is GPU-only in nccl-tests" in output, output
    assert "unrecognized" not in output


@pytest.mark.parametrize("args, why", [
    (["-J", "out.txt"], "-J infers the format from the suffix"),
    (["-J", "a.json", "--json", "b.json"], "name two json files"),
    (["-m", "0"], "-m/--agg_iters"),
    (["-r", "first"], "expected a rank or all"),
])
def test_output_and_flag_mistakes_are_refused(tmp_path, capsys, args, why):
    output, _ = bench_here(tmp_path, capsys, "all_reduce", *args, status=2, json_out=False)
    assert why in output, output


def test_timeout_is_dpcores(tmp_path, capsys, monkeypatch):
    """-T: nccl-tests' seconds a collective may wait, as dpcore.init's timeout; 0: dpcore's."""
    import dpcore

    seen = []
    init = dpcore.init
    monkeypatch.setattr(dpcore, "init", lambda **kw: seen.append(kw) or init(**kw))
    bench_here(tmp_path, capsys, "all_reduce", "-b", "8", "-e", "8", "-n", "1", "-T", "7")
    bench_here(tmp_path, capsys, "all_reduce", "-b", "8", "-e", "8", "-n", "1")
    assert seen == [{"timeout": 7}, {"timeout": None}]
