"""`python -m dpcore.train` as a newcomer meets it: arguments it cannot use are refused by
argparse (exit 2, one message even under mpiexec), every option shows its default, SGD gets a
learning rate it trains with, and --save / --resume continue a run at another world size and
ZeRO stage."""
import pytest

from dpcore import train
from dpcore.cli_args import HelpFormatter, Parser
from mpi_helpers import run_mpi, run_python

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


@pytest.mark.parametrize("bad, why", [
    (["--batch-size", "0"], "--batch-size: expected 1 or more, not 0"),
    (["--epochs", "-1"], "--epochs: expected 1 or more, not -1"),
    (["--hidden", "0"], "--hidden: expected 1 or more, not 0"),
    (["--bucket-mb", "-5"], "--bucket-mb: expected a positive number, not -5"),
    (["--lr", "0"], "--lr: expected a positive number, not 0"),
    (["--epochs", "two"], "--epochs: expected a whole number, not 'two'"),
])
def test_arguments_it_cannot_use_are_refused(bad, why, capsys):
    with pytest.raises(SystemExit) as exit:
        train.parse_args(bad)
    assert exit.value.code == 2
    assert why in capsys.readouterr().err


def test_each_optimizer_gets_its_own_learning_rate_unless_one_is_given():
    assert train.parse_args([]).lr == train.DEFAULT_LR["adamw"]
    assert train.parse_args(["--optimizer", "sgd"]).lr == train.DEFAULT_LR["sgd"]
    assert train.parse_args(["--optimizer", "sgd", "--lr", "0.5"]).lr == 0.5


def test_help_shows_the_defaults():
    text = Parser(prog="p", formatter_class=HelpFormatter)
    text.add_argument("--seed", type=int, default=0, help="seed")
    text.add_argument("--flag", action="store_true", help="a flag")
    text.add_argument("--unset", default=None, help="nothing by default")
    shown = text.format_help()
    assert "seed (default: 0)" in shown
    assert "a flag\n" in shown and "nothing by default\n" in shown  # no "(default: None)"


@pytest.mark.mpi
def test_under_mpiexec_a_bad_argument_is_reported_once():
    rc, out = run_mpi(2, ["-m", "dpcore.train", "--batch-size", "0"], check=False)
    assert rc == 2, out
    assert out.count("usage:") == 1 and out.count("expected 1 or more") == 1, out


@pytest.mark.mpi
def test_a_run_saved_on_2_ranks_resumes_on_3_at_another_stage(tmp_path):
    ck = tmp_path / "ck"
    small = ["--hidden", "16", "--save", ck]
    _, out = run_mpi(2, ["-m", "dpcore.train", "--epochs", "1", *small], env=ONE_THREAD)
    assert "epoch   1" in out and "done: 1 epoch(s)" in out, out
    _, out = run_mpi(3, ["-m", "dpcore.train", "--epochs", "2", "--zero-stage", "2",
                         "--resume", ck, *small], env=ONE_THREAD)
    assert "epoch   1" not in out and "epoch   2" in out and "done: 1 epoch(s)" in out, out
    _, out = run_python(["-m", "dpcore.train", "--epochs", "2", "--hidden", "16", "--resume", ck],
                        env=ONE_THREAD)
    assert "nothing to train: the checkpoint is at epoch 2 of 2" in out, out
