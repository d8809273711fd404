"""The tutorial's recorded outputs are what the code prints: every block of a command whose
output does not depend on timing (explain, cost memory, cost scaling) is made again by
docs/outputs.py and compared, line for line."""
import sys
from pathlib import Path

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
