"""Run PyTorch's distributed test suite (spawn_suite.py) on one backend at one world size, and
write each test's outcome to a file that compare.py reads:

    python tests/torch_suite/run.py --backend dpcore --world-size 2 -k "all_reduce" \
        --out /tmp/dpcore-2.tsv
    python tests/torch_suite/run.py --backend gloo test_barrier test_send_recv

The file has a line per test: name, passed/failed/skipped, and the first line of the error
(for a failure: the exception a rank raised, else pytest's) or the skip's reason, tab-separated,
after a `#` line that says what ran. The whole suite takes about 20 minutes per backend on two
cores; tests may be named, or selected by -k as pytest does. Exits 0 when no test failed.
"""
import argparse
import datetime
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


class Outcomes:
    """A pytest plugin: each test's outcome, a failure in any phase overriding a pass; written
    to `path` as each test ends (an interrupted run keeps what it ran)."""

    def __init__(self, path, header):
        self.rows, self.path, self.header = {}, path, header

    def pytest_runtest_logreport(self, report):
        name = report.nodeid.rsplit("::", 1)[-1]
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            self.rows[name] = ("skipped", reason.removeprefix("Skipped: "))
        elif report.failed:
            self.rows[name] = ("failed", first_error_line(report))
        elif report.when == "call":
            self.rows.setdefault(name, ("passed", ""))
        if report.when == "teardown" and self.path:
            self.write()

    def write(self):
        with open(self.path, "w") as f:
            f.write(f"# {self.header}\n")
            for name, (outcome, reason) in sorted(self.rows.items()):
                f.write(f"{name}\t{outcome}\t{one_line(reason)}\n")


def first_error_line(report):
    """The exception the first failed rank raised (torch's error carries each failed rank's
    traceback: its first unindented line after "Traceback"), else the error's first line."""
    crash = getattr(report.longrepr, "reprcrash", None)
    lines = (crash.message if crash is not None else report.longreprtext).splitlines()
    in_traceback = False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif in_traceback and line and not line[0].isspace():
            return line
    return next((line for line in lines if line.strip()), "")


def one_line(text):
    return " ".join(str(text).split())[:300]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", required=True, choices=["gloo", "dpcore"])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("tests", nargs="*", help="tests by name (default: all, or -k's)")
    parser.add_argument("-k", default=None, help="pytest's -k expression")
    parser.add_argument("--out", default=None, help="the outcome file (default: none written)")
    parser.add_argument("--timeout", type=int, default=240,
                        help="seconds a test may run (torch's default is 300)")
    args = parser.parse_args()

    # Read by torch's suite at import (BACKEND, WORLD_SIZE, TEMP_DIR, INIT_METHOD) and per test.
    temp = tempfile.TemporaryDirectory(prefix="torch-suite-")
    # INIT_METHOD file:// as torch's CI runs the suite "with init file": the tests that make a
    # new default group (barrier timeouts) need it; each test's ranks get a file of their own.
    os.environ.update(BACKEND=args.backend, WORLD_SIZE=str(args.world_size), TEMP_DIR=temp.name,
                      INIT_METHOD=f"file://{temp.name}/init_file",
                      DISTRIBUTED_TESTS_DEFAULT_TIMEOUT=str(args.timeout))
    # a dpcore call that cannot complete (a test that makes ranks disagree) fails in a minute
    os.environ.setdefault("DPCORE_TIMEOUT", "60")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                  if p])
    sys.path[:0] = [str(ROOT), str(HERE)]

    import pytest
    import torch

    started = datetime.datetime.now()
    outcomes = Outcomes(args.out, f"backend={args.backend} world_size={args.world_size} "
                                  f"k={args.k or ''} torch={torch.__version__} "
                                  f"started={started:%Y-%m-%d %H:%M}")
    suite = str(HERE / "spawn_suite.py")
    pytest_args = [f"{suite}::TestDistBackendWithSpawn::{t}" for t in args.tests] or [suite]
    pytest_args += ["-q", "-p", "no:cacheprovider", "--noconftest",
                   "-o", "addopts=", "--rootdir", str(HERE)]
    if args.k:
        pytest_args += ["-k", args.k]
    code = pytest.main(pytest_args, plugins=[outcomes])
    if args.out:
        minutes = (datetime.datetime.now() - started).total_seconds() / 60
        outcomes.header += f" minutes={minutes:.1f}"
        outcomes.write()
    temp.cleanup()
    return 0 if code in (0, 5) and all(o != "failed" for o, _ in outcomes.rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
