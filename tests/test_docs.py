"""The tutorial's recorded outputs are what the code prints: every block of a command whose
output does not depend on timing (explain, cost memory, cost scaling) is made again by
docs/outputs.py and compared, line for line; the others (train, the bench, cost fit) are run
and must exit 0."""
import os
import sys
from pathlib import Path

import pytest

from mpi_helpers import run_python

OUTPUTS = Path(__file__).resolve().parent.parent / "docs" / "outputs.py"


def test_the_tutorials_deterministic_outputs_match_the_code():
    _, out = run_python([OUTPUTS, "--check"], timeout=300)
    assert "matches" in out, out


def test_shown_keeps_the_chosen_lines_and_marks_the_gaps():
    sys.path.insert(0, str(OUTPUTS.parent))
    from outputs import shown

    lines = [str(i) for i in range(1, 11)]
    assert shown(lines, None) == lines
    assert shown(lines, "1-2, 5, -2") == ["1", "2", "...", "5", "...", "9", "10"]
    assert shown(lines, "3-4") == ["...", "3", "4", "..."]


@pytest.mark.slow
@pytest.mark.mpi
def test_every_timed_command_of_the_tutorial_runs(tmp_path):
    """The commands whose output depends on timing (train, the bench, cost fit) cannot be
    compared line for line; each must still run, in the tutorial's order (a fit, then the runs
    that read it), and exit 0. Their files go to a fresh folder instead of /tmp."""
    import subprocess

    sys.path.insert(0, str(OUTPUTS.parent))
    from outputs import BLOCK, DETERMINISTIC, TUTORIAL, commands

    timed = [c for m in BLOCK.finditer(TUTORIAL.read_text()) for c in commands(m)
             if not c.startswith(DETERMINISTIC)]
    assert len(timed) >= 8, timed
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(OUTPUTS.parent.parent))
    for command in timed:
        command = command.replace("/tmp/", f"{tmp_path}/")
        done = subprocess.run(command, shell=True, cwd=OUTPUTS.parent.parent, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command}:\n{done.stdout}{done.stderr}"
