"""Launching test scripts under `mpiexec -n K` from pytest.

Every multi-rank test runs a plain program from tests/scripts/ as a subprocess, with a timeout, so
a hang fails one test instead of the whole run. The scripts run through `python -m mpi4py`, so an
uncaught exception on one rank aborts the job instead of leaving the other ranks waiting.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"
DEFAULT_TIMEOUT = 120


def find_mpiexec():
    """The mpiexec of this Python's MPI (pip's mpich puts it beside the interpreter); a PATH
    shim (pyenv) would also cost half a second per launch."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


MPIEXEC = find_mpiexec()


def run_script(script, n, *args, timeout=DEFAULT_TIMEOUT, env=None, mpiexec_args=(),
               wrapper=(), check=True):
    """Run tests/scripts/<script> on n ranks; return (returncode, output) with stdout and stderr
    merged. With check=True, fail the test unless the job exits 0.

    `env` adds to (and overrides) the environment. DPCORE_TIMEOUT defaults to 60 s there, so a
    library hang surfaces as a CommError well before the subprocess timeout. `wrapper` goes
    between mpiexec's arguments and the Python command (e.g. scripts/as_child.py)."""
    if MPIEXEC is None:
        pytest.fail("mpiexec not found: pip install mpich (or put an MPI's mpiexec on PATH)")
    full_env = dict(os.environ, DPCORE_TIMEOUT="60")
    full_env.update(env or {})
    cmd = [MPIEXEC, *mpiexec_args, "-n", str(n), *wrapper, sys.executable, "-m", "mpi4py",
           str(SCRIPTS / script), *map(str, args)]
    # A new session, so a timeout can kill mpiexec and every rank it started, and nothing else.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env,
                            text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        output, _ = proc.communicate()
        pytest.fail(f"mpiexec -n {n} {script} {' '.join(map(str, args))} timed out after "
                    f"{timeout} s; output:\n{output}")
    if check and proc.returncode != 0:
        pytest.fail(f"mpiexec -n {n} {script} {' '.join(map(str, args))} exited with "
                    f"{proc.returncode}; output:\n{output}")
    return proc.returncode, output


def kill_session(sid):
    """SIGKILL every process of session `sid`: mpiexec, its proxy and the ranks (hydra gives each
    rank its own process group, but they all stay in the session we started)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            session = int(stat[stat.rindex(")") + 2:].split()[3])
            if session == sid:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            pass  # gone meanwhile, or not ours to read


def run_ok(script, n, *args, **kwargs):
    """Run a script that must pass on every rank: each rank ends by printing
    'rank R: ok (...)'. Returns the output."""
    _, output = run_script(script, n, *args, **kwargs)
    done = {int(r) for r in re.findall(r"^rank (\d+): ok\b", output, re.MULTILINE)}
    assert done == set(range(n)), f"not every rank reported ok; output:\n{output}"
    return output


def rank_lines(output, tag):
    """{rank: rest of line} for the lines 'rank R: TAG rest' the ranks printed."""
    found = {}
    for r, rest in re.findall(rf"^rank (\d+): {tag} (.*)$", output, re.MULTILINE):
        found[int(r)] = rest
    return found
