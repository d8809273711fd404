"""Compare outcome files that run.py wrote (gloo's first, then dpcore's): how many tests passed,
failed and were skipped on each, and the tests that pass on the first but not on the others,
with each one's outcome and first error line there.

    python tests/torch_suite/compare.py gloo-2.tsv dpcore-2.tsv [--markdown]

A run may be several files joined by '+' (parts of one suite run separately: a later file's
outcome of a test replaces an earlier one's). --common counts only the tests every run ran (runs
cut short at different points).
"""
import argparse
from pathlib import Path

OUTCOMES = ("passed", "failed", "skipped")


def read(path):
    """{test: (outcome, reason)} from an outcome file (or files joined by '+'); `#` lines are
    headers."""
    rows = {}
    for line in "\n".join(Path(p).read_text() for p in str(path).split("+")).splitlines():
        if line and not line.startswith("#"):
            name, outcome, reason = (line.split("\t") + ["", ""])[:3]
            rows[name] = (outcome, reason)
    return rows


def header(path):
    firsts = [Path(p).read_text().splitlines()[:1] for p in str(path).split("+")]
    return "; ".join(f[0].lstrip("# ") for f in firsts if f and f[0].startswith("#"))


def name(path):
    return "+".join(Path(p).stem for p in str(path).split("+"))


def counts(rows):
    return {o: sum(1 for outcome, _ in rows.values() if outcome == o) for o in OUTCOMES}


def lost(base, other):
    """The tests that pass in base and not in other: {test: (outcome in other, reason)}."""
    return {name: other.get(name, ("not run", "")) for name, (outcome, _) in sorted(base.items())
            if outcome == "passed" and other.get(name, ("not run",))[0] != "passed"}


def table(paths, markdown, common=False):
    runs = [read(p) for p in paths]
    if common:
        shared = set.intersection(*(set(r) for r in runs))
        runs = [{t: r[t] for t in r if t in shared} for r in runs]
    names = [name(p) for p in paths]
    lines = []
    if markdown:
        lines += ["| run | " + " | ".join(OUTCOMES) + " |", "| --- |" + " ---: |" * len(OUTCOMES)]
        lines += [f"| {n} | " + " | ".join(str(counts(r)[o]) for o in OUTCOMES) + " |"
                  for n, r in zip(names, runs)]
    else:
        lines += [f"{'run':<16}" + "".join(f"{o:>9}" for o in OUTCOMES)]
        lines += [f"{n:<16}" + "".join(f"{counts(r)[o]:>9}" for o in OUTCOMES)
                  for n, r in zip(names, runs)]
    for other, rows in zip(names[1:], runs[1:]):
        missing = lost(runs[0], rows)
        lines += ["", f"passed on {names[0]}, not on {other}: {len(missing)}"]
        for test, (outcome, reason) in missing.items():
            lines.append(f"- `{test}`: {outcome}: {reason}" if markdown
                         else f"  {test:<60} {outcome:<8} {reason}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="outcome files, the reference (gloo's) first")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table and list")
    parser.add_argument("--common", action="store_true",
                        help="count only the tests that every run ran")
    args = parser.parse_args()
    for path in args.files:
        print(f"{name(path)}: {header(path)}")
    print()
    print(table(args.files, args.markdown, args.common))


if __name__ == "__main__":
    main()
