"""`python -m dpcore.train` as a newcomer meets it: arguments it cannot use are refused by
argparse (exit 2, one message even under mpiexec), every option shows its default, SGD gets a
learning rate it trains with, --save / --resume continue a run at another world size and ZeRO
stage, and --device cuda trains on the GPU, or, without one, stops every rank with one line.
Its output, redirected, holds no progress bar's frames; --quiet leaves the final result alone,
--log-every N an epoch line every N epochs. Each rank's BLAS gets its share of the cores."""
import os
import pty
import re

import pytest

from array_modules import cupy_unusable
from dpcore import train
from dpcore._cli.args import HelpFormatter, Parser
from mpi_helpers import SCRIPTS, rank_lines, run_mpi, run_ok, run_python

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


def curve(out):
    return re.findall(r"^epoch +(\d+)  loss (\S+)\s+test acc (\S+)", out, re.MULTILINE)


@pytest.mark.mpi
def test_the_loop_keeps_to_the_models_array_module(tmp_path):
    """The same runs on numpy and on strict_xp (NumPy underneath, refusing to become NumPy
    unasked, as GPU arrays do): the same curve to the last digit, checkpoints included."""
    curves = {}
    for name in ("numpy", "strict"):
        ck = tmp_path / name
        small = ["--hidden", "16", "--batch-size", "256", "--save", ck]
        _, out = run_mpi(2, [SCRIPTS / "train_on.py", name, "--epochs", "1", "--zero-stage", "3",
                             *small], env=ONE_THREAD)
        _, more = run_mpi(2, [SCRIPTS / "train_on.py", name, "--epochs", "2", "--zero-stage", "1",
                              "--mixed-precision", "float16", "--resume", ck, *small],
                          env=ONE_THREAD)
        curves[name] = curve(out) + curve(more)
        assert [e for e, _, _ in curves[name]] == ["1", "2"], out + more
    assert curves["strict"] == curves["numpy"]


@pytest.mark.mpi
def test_device_cuda_without_a_gpu_stops_every_rank_with_one_line():
    why = cupy_unusable()
    if why is None:
        pytest.skip("CuPy has a usable GPU here: test_device_cuda_trains_on_the_gpu runs instead")
    rc, out = run_mpi(2, ["-m", "dpcore.train", "--device", "cuda", "--epochs", "1"],
                      env=ONE_THREAD, check=False)
    assert rc == 2, out
    lines = out.strip().splitlines()
    assert sorted(line.split(":")[1] for line in lines) == [" rank 0", " rank 1"], out
    assert all(line.startswith("dpcore.train: rank ") and "device 'cuda' " in line
               for line in lines), out


PEER_HAS_NO_GPU = """
import sys
import numpy as np
from dpcore import train
from mpi4py import MPI

def no_gpu_on_rank_1(device, local_rank=0):  # rank 0 has one, rank 1 none
    if MPI.COMM_WORLD.rank == 1:
        raise RuntimeError("device 'cuda' finds no usable GPU here: (pretended)")
    return np
train.device_module = no_gpu_on_rank_1
sys.exit(train.main(["--device", "cuda", "--epochs", "1"]))
"""


@pytest.mark.mpi
def test_a_rank_without_a_gpu_stops_the_ranks_that_have_one():
    rc, out = run_mpi(2, ["-c", PEER_HAS_NO_GPU], env=ONE_THREAD, check=False)
    assert rc == 2, out
    assert sorted(out.strip().splitlines()) == [
        "dpcore.train: rank 0: --device cuda works here, but not on rank(s) 1: every rank stops",
        "dpcore.train: rank 1: device 'cuda' finds no usable GPU here: (pretended)"], out


@pytest.mark.mpi
def test_device_cuda_trains_on_the_gpu():
    why = cupy_unusable()
    if why is not None:
        pytest.skip(why)
    small = ["--epochs", "2", "--hidden", "16", "--zero-stage", "2"]
    _, cpu = run_mpi(2, ["-m", "dpcore.train", *small], env=ONE_THREAD)
    _, gpu = run_mpi(2, ["-m", "dpcore.train", "--device", "cuda", *small], env=ONE_THREAD)
    assert ", on cuda" in gpu and "done: 2 epoch(s)" in gpu, gpu
    for (_, loss_c, acc_c), (_, loss_g, acc_g) in zip(curve(cpu), curve(gpu), strict=True):
        # the GPU's sums round in another order: the same model, not the same bits
        assert abs(float(loss_c) - float(loss_g)) < 2e-3, (cpu, gpu)
        assert abs(float(acc_c) - float(acc_g)) < 0.02, (cpu, gpu)


@pytest.mark.parametrize("epoch, sealed, says", [(1000000, False, "checksum"),
                                                 (-5, True, "epoch is -5")])
def test_the_epoch_of_a_checkpoint_is_checked_like_its_state(tmp_path, epoch, sealed, says):
    """Issue 27: the epoch a run resumes after is part of the checkpoint's manifest. Changed
    (as train.json was: a separate file beside it), the checksum refuses it; sealed (the
    checksum recomputed), a value no save writes is refused rather than trained from."""
    import json

    from dpcore.parallel import manifest

    ck = tmp_path / "ck"
    run_python(["-m", "dpcore.train", "--epochs", "1", "--hidden", "8", "--save", ck],
               env=ONE_THREAD)
    if (ck / "train.json").exists():  # where the epoch was kept, outside the manifest
        (ck / "train.json").write_text(json.dumps({"epoch": epoch}))
    meta_file = ck / (ck / "latest").read_text() / "meta.json"
    meta = json.loads(meta_file.read_text())
    if "extra" in meta:
        meta["extra"]["epoch"] = epoch
        if sealed:
            meta["checksum"] = manifest.digest({k: v for k, v in meta.items() if k != "checksum"})
        meta_file.write_text(json.dumps(meta))
    rc, out = run_python(["-m", "dpcore.train", "--epochs", "2", "--hidden", "8", "--resume",
                          ck], env=ONE_THREAD, check=False)
    assert rc != 0 and says in out and "nothing to train" not in out, out
    assert "epoch  -4" not in out, out


FAKE_TQDM = """
import sys
class tqdm:
    def __init__(self, total=None, disable=None, **kwargs):
        self.shown = not disable if disable is not None else sys.stderr.isatty()
        self.update(0)
    def update(self, n=1):
        if self.shown:
            sys.stderr.write("\\rFRAME")
    def close(self):
        pass
"""


@pytest.mark.mpi
def test_redirected_output_has_no_progress_frames(tmp_path):
    """Under mpiexec, with the output going to a pipe (here, pytest's), not a terminal: no
    frames, from a tqdm that draws them wherever it is not disabled."""
    (tmp_path / "tqdm.py").write_text(FAKE_TQDM)
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    _, out = run_mpi(2, ["-m", "dpcore.train", "--epochs", "1", "--hidden", "16"],
                     env={**ONE_THREAD, "PYTHONPATH": path})
    assert "done: 1 epoch(s)" in out and "FRAME" not in out, out


@pytest.mark.mpi
def test_under_mpiexec_in_a_terminal_the_bar_is_drawn():
    """The other side: mpiexec's stderr is a terminal (a pty here), so rank 0's bar belongs."""
    terminal, other_end = pty.openpty()
    try:
        _, out = run_mpi(1, ["-c", "from dpcore._cli.terminal import stderr_is_terminal as t; "
                                   "print(t())"], stderr=other_end)
    finally:
        os.close(terminal)
        os.close(other_end)
    assert out.strip() == "True", out


@pytest.mark.slow
def test_quiet_prints_the_result_alone_and_log_every_every_nth_epoch():
    small = ["-m", "dpcore.train", "--epochs", "3", "--hidden", "16", "--batch-size", "256"]
    _, out = run_python([*small, "--log-every", "2"], env=ONE_THREAD)
    assert [e for e, _, _ in curve(out)] == ["2"] and "done: 3 epoch(s)" in out, out
    _, out = run_python([*small, "--quiet"], env=ONE_THREAD)
    assert out.startswith("done: 3 epoch(s)") and out.count("\n") == 1, out
    rc, out = run_python([*small, "--quiet", "--log-every", "2"], check=False)
    assert rc == 2 and "not allowed with argument" in out, out


@pytest.mark.mpi
@pytest.mark.parametrize("n", [1, 2])
def test_each_rank_gets_its_share_of_the_cores_for_blas(n):
    """cores // ranks on the node, so one rank and two run as many BLAS threads in all; a
    count the user set is kept."""
    unset = {"OMP_NUM_THREADS": None, "OPENBLAS_NUM_THREADS": None, "MKL_NUM_THREADS": None}
    share = max(1, len(os.sched_getaffinity(0)) // n)
    threads = rank_lines(run_ok("blas_share.py", n, env=unset), "threads")
    assert threads == {r: str(share) for r in range(n)}
    if n == 1 and share > 1:  # (OpenBLAS starts no more threads than cores)
        kept = run_ok("blas_share.py", n, env={**unset, "OPENBLAS_NUM_THREADS": "1"})
        assert rank_lines(kept, "threads") == {0: "1"}
