#!/usr/bin/env python3
"""The recorded outputs in docs/tutorial.md, regenerated from the code as it is now.

Every fenced block whose first line is `$ COMMAND` records what COMMAND printed (a later line
that starts with `$ ` begins another command's, after a blank line). A comment on the line
before the block may choose which lines it keeps of each: `<!-- show: 1-3, 40-45, -4 -->` keeps
lines 1-3 and 40-45 and the last 4 of the output, with `...` where lines were left out. Without
one the block keeps the whole output.

    python docs/outputs.py            # run every command, top to bottom, and rewrite the blocks
    python docs/outputs.py --check    # only the commands whose output does not depend on timing
                                      # (explain, cost memory, cost scaling): exit 1 on a difference

The commands run from the repository's root, as a reader runs them from a fresh clone; those
that time something (the bench, train, cost fit) print other numbers on every run, so
tests/test_docs.py checks the others only.
"""
import argparse
import contextlib
import difflib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the dpcore of this checkout, as `python -m` from the root
TUTORIAL = ROOT / "docs" / "tutorial.md"
# Commands whose output is the same on every run and every machine.
DETERMINISTIC = ("python -m dpcore.explain ", "python -m dpcore.cost memory ",
                 "python -m dpcore.cost scaling ")
BLOCK = re.compile(r"(?:<!-- show: (?P<show>[^>]*?) -->\n)?```\n\$ (?P<cmd>[^\n]*)\n"
                   r"(?P<out>.*?)```", re.S)


def shown(output_lines, spec):
    """The lines `spec` keeps ("1-3, 40-45, -4"; None: all), with "..." for each gap."""
    if not spec:
        return output_lines
    n, keep = len(output_lines), set()
    for part in spec.split(","):
        part = part.strip()
        if part.startswith("-"):
            keep.update(range(max(n - int(part[1:]), 0), n))
        else:
            first, _, last = part.partition("-")
            keep.update(range(int(first) - 1, min(int(last or first), n)))
    lines, previous = [], -1
    for i in sorted(keep):
        if i != previous + 1:
            lines.append("...")
        lines.append(output_lines[i])
        previous = i
    if previous != n - 1:
        lines.append("...")
    return lines


def run(command):
    """What `command` prints (stdout and stderr), run from the repository's root: in this
    process where it is a deterministic `python -m dpcore...` one (no interpreter to start),
    else by a shell."""
    if command.startswith(DETERMINISTIC):
        _, _, module, *argv = shlex.split(command)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            importlib.import_module(f"{module}.__main__").main(argv)
        return printed.getvalue().rstrip("\n").splitlines()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", COLUMNS="100")
    done = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    return (done.stdout + done.stderr).rstrip("\n").splitlines()


def commands(match):
    """The block's commands: its first line's, and any later line that starts with "$ " (a
    block may show two runs to compare, a blank line between them)."""
    return [match["cmd"]] + [line[2:] for line in match["out"].splitlines()
                             if line.startswith("$ ")]


def regenerate(text, only_deterministic):
    """text with every block (or every deterministic one) made again from its commands."""
    def again(match):
        if only_deterministic and not all(c.startswith(DETERMINISTIC) for c in commands(match)):
            return match[0]
        show = match["show"]
        parts = []
        for command in commands(match):
            print(f"$ {command}", file=sys.stderr, flush=True)
            parts.append("\n".join([f"$ {command}", *shown(run(command), show)]))
        head = f"<!-- show: {show} -->\n" if show else ""
        return head + "```\n" + "\n\n".join(parts) + "\n```"
    return BLOCK.sub(again, text)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true",
                   help="compare the deterministic blocks with what the code prints now")
    args = p.parse_args()
    text = TUTORIAL.read_text()
    new = regenerate(text, only_deterministic=args.check)
    if args.check:
        if new != text:
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(True), new.splitlines(True), "docs/tutorial.md", "the code"))
            return 1
        print("docs/tutorial.md: every output of explain, cost memory and cost scaling matches")
        return 0
    TUTORIAL.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
