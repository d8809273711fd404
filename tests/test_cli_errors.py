"""The command-line programs end the job after an error instead of hanging
(dpcore/_cli/errors.py): a survivor's CommError is printed and the job exits non-zero at once,
not after MPI_Finalize has waited for the dead rank (minutes); an error on one rank alone ends
the others too."""
import sys

import pytest

from dpcore._cli.errors import run_main
from mpi_helpers import SCRIPTS, rank_lines, remove_mpi_shm_leftovers, run_mpi

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def train_fails(how, tmp_path):
    """`python -m dpcore.train` on 2 ranks whose last one fails `how` after step 3. The whole
    run, start-up included, takes seconds: 30 s is far from both the finish and a hang (and the
    survivors' DPCORE_TIMEOUT, 60 s)."""
    rc, out = run_mpi(2, [SCRIPTS / "train_dies.py", how, "3", tmp_path, "--epochs", "1",
                          "--hidden", "16"],
                      mpiexec_args=["-disable-auto-cleanup"],
                      wrapper=[sys.executable, str(SCRIPTS / "as_child.py")],
                      env=ONE_THREAD, timeout=30, check=False)
    reached = "".join(p.read_text() for p in tmp_path.glob("rank*.txt"))
    remove_mpi_shm_leftovers(reached)
    assert set(rank_lines(reached, "mpi shm")) >= {1}, f"rank 1 never reached step 3:\n{out}"
    assert rc != 0, out
    assert "epoch   1" not in out, f"a rank trained on:\n{out}"
    return out


@pytest.mark.mpi
def test_train_prints_the_commerror_and_ends_when_a_rank_dies(tmp_path):
    out = train_fails("kill", tmp_path)
    assert "dpcore.CommError: dpcore all_reduce" in out and "rank 1 (pid" in out, out


@pytest.mark.mpi
def test_train_ends_every_rank_when_one_raises_alone(tmp_path):
    train_fails("raise", tmp_path)  # what it printed may be lost: MPI_Abort ends its forwarding


def test_one_rank_raises_as_usual():
    def main():
        raise RuntimeError("one rank: nothing to end")
    with pytest.raises(RuntimeError, match="nothing to end"):
        run_main(main)
    with pytest.raises(SystemExit) as exit:
        run_main(lambda: 3)
    assert exit.value.code == 3


def test_an_error_the_user_made_is_one_line_and_status_2(capsys):
    from dpcore._cli.errors import UsageError

    def main():
        raise UsageError("checkpoint ck not loaded: ck/latest is missing")
    with pytest.raises(SystemExit) as exit:
        run_main(main)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err.count("\n") == 1, err
    assert err.endswith("error: checkpoint ck not loaded: ck/latest is missing\n"), err


@pytest.mark.parametrize("command", ["dpcore.cost predict all_reduce --alpha 1 --bandwidth 1",
                                     "dpcore.explain broadcast --ranks 3"])
def test_a_closed_pipe_is_not_a_traceback(command):
    import subprocess
    done = subprocess.run(f"{sys.executable} -m {command} | head -1", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.count("\n") == 1 and done.stderr == "", done


def train_here(tmp_path, monkeypatch, capsys, *args):
    """`python -m dpcore.train *args` on one rank in this process: (exit status, stderr)."""
    from dpcore import train
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit:
        run_main(train.main, ["--epochs", "1", "--hidden", "8", *map(str, args)])
    return exit.value.code, capsys.readouterr().err


def test_train_resume_from_a_missing_folder_is_one_line(tmp_path, monkeypatch, capsys):
    status, err = train_here(tmp_path, monkeypatch, capsys, "--resume", tmp_path / "nothing")
    assert status == 2 and "nothing" in err and "Traceback" not in err, err


def test_train_save_to_a_folder_it_cannot_make_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("")
    status, err = train_here(tmp_path, monkeypatch, capsys, "--save", tmp_path / "a-file" / "ck")
    assert status == 2 and "a-file" in err and "Traceback" not in err, err


def test_train_bfloat16_without_ml_dtypes_is_refused(monkeypatch, capsys):
    from dpcore import train
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes: ImportError
    with pytest.raises(SystemExit) as exit:
        train.parse_args(["--mixed-precision", "bfloat16"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "ml_dtypes" in err and "Traceback" not in err, err


@pytest.mark.mpi
def test_train_errors_every_rank_agrees_on_end_without_mpi_abort(tmp_path):
    """A checkpoint that does not load fails on every rank alike: one line, status 2, and every
    rank leaves through MPI_Finalize (MPI_Abort would leave MPICH's segment in /dev/shm)."""
    rc, out = run_mpi(2, ["-m", "dpcore.train", "--epochs", "1", "--hidden", "8",
                          "--resume", tmp_path / "nothing"], env=ONE_THREAD, check=False)
    assert rc == 2, out
    assert out.count("error:") == 1 and "Traceback" not in out and "Abort" not in out, out
