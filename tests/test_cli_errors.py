"""The command-line programs end the job after an error instead of hanging
(dpcore/_cli/errors.py): a survivor's CommError is printed and the job exits non-zero at once,
not after MPI_Finalize has waited for the dead rank (minutes); an error on one rank alone ends
the others too."""
import sys

import pytest

from dpcore._cli.errors import run_main
from mpi_helpers import SCRIPTS, rank_lines, run_mpi
from test_faults import remove_mpi_shm_leftovers

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
