"""What a user reaches for when something is off: `python -m dpcore` (the installation and every
DPCORE_* value, as torch's collect_env), `--version` on every command, and DPCORE_DEBUG=INFO
(what init set up, and each algorithm choice as it happens, as NCCL_DEBUG=INFO)."""
import numpy as np
import pytest

import dpcore
from dpcore import __main__ as command
from dpcore._cli import environment
from dpcore import train
from dpcore.bench.options import parser as bench_parser
from dpcore.cost.__main__ import main as cost_main
from dpcore.explain.__main__ import main as explain_main
from mpi_helpers import run_python


def test_the_summary_names_the_build_mpi_and_every_setting(monkeypatch):
    monkeypatch.setenv("DPCORE_TIMEOUT", "7")
    monkeypatch.setenv("DPCORE_TIMOUT", "1")
    text = "\n".join(environment.summary())
    assert f"dpcore {dpcore.__version__}" in text
    assert "build: CUDA" in text and "CPU loops" in text and "MPI: " in text, text
    assert "DPCORE_TIMEOUT=7" in text and "DPCORE_SPIN_US unset (default 100.0)" in text, text
    assert "DPCORE_TIMOUT=1: not a dpcore setting" in text, text
    assert "native" in dpcore.build_info()


def test_python_m_dpcore_prints_it():
    _, out = run_python(["-m", "dpcore"])
    assert out.startswith(f"dpcore {dpcore.__version__}") and "settings (DPCORE_*)" in out, out


@pytest.mark.parametrize("parse", [
    train.parse_args, cost_main, explain_main, bench_parser().parse_args, command.main])
def test_every_command_has_version(parse, capsys):
    with pytest.raises(SystemExit) as exit:
        parse(["--version"])
    assert exit.value.code == 0
    assert f"(dpcore {dpcore.__version__})" in capsys.readouterr().out


def test_the_bench_records_what_its_numbers_were_measured_with(tmp_path, capsys):
    from test_bench import bench_here

    output, doc = bench_here(tmp_path, capsys, "all_reduce", "-b", "8", "-e", "8", "-n", "1",
                             "-w", "0")
    env = doc["environment"]
    assert env["dpcore"] == dpcore.__version__ and "MPICH" in env["mpi"] and env["host"], env
    assert f"# dpcore {dpcore.__version__}" in output and env["date"] in output, output


def test_debug_info_says_what_init_set_up(monkeypatch, capsys):
    monkeypatch.setenv("DPCORE_DEBUG", "INFO")
    with dpcore.init():
        pass
    err = capsys.readouterr().err
    assert "dpcore INFO rank 0/1: transport" in err and "node 0 of 1" in err, err
    assert "dpcore INFO settings: timeout=" in err and "debug=INFO" in err, err


def test_debug_info_prints_each_algorithm_choice_once(monkeypatch, capfd):
    """A line the first time a (collective, dtype, power-of-two size class) runs an algorithm,
    written by C++ to fd 2; none without DPCORE_DEBUG=INFO."""
    x = np.ones(1000, np.float32)  # 4000 bytes
    for debug in ("INFO", None):
        if debug:
            monkeypatch.setenv("DPCORE_DEBUG", debug)
        else:
            monkeypatch.delenv("DPCORE_DEBUG")
        with dpcore.init() as comm:
            for _ in range(3):
                comm.all_reduce(x, algo="one_shot")
                comm.all_reduce(x[:900], algo="one_shot")  # 3600 bytes: the same size class
            comm.all_reduce(x, algo="ring")
            comm.all_reduce(x.astype(np.float64), algo="ring")
            comm.broadcast(np.ones(10, np.int32), algo="one_shot")
            comm.all_gather(np.ones(3, np.float32), algo="ring")  # its shard lengths: no line
        err = capfd.readouterr().err
        choices = [line.split("dpcore INFO algorithm: ")[1] for line in err.splitlines()
                   if "dpcore INFO algorithm: " in line]
        assert choices == (["all_reduce float32, 2 KiB to 4 KiB: one_shot",
                            "all_reduce float32, 2 KiB to 4 KiB: ring",
                            "all_reduce float64, 4 KiB to 8 KiB: ring",
                            "broadcast int32, 32 B to 64 B: one_shot",
                            "all_gather float32, 8 B to 16 B: ring"] if debug else []), err
