"""What a user reaches for when something is off: `python -m dpcore` (the installation and every
DPCORE_* value, as torch's collect_env), `--version` on every command, and DPCORE_DEBUG=INFO
(what init set up, as NCCL_DEBUG=INFO)."""
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
