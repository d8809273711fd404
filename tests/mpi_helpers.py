"""Launching Python under `mpiexec -n K` (and, for the few tests that need one, alone) from pytest.

The one place the tests start a process: each runs in a session of its own with a timeout, and a
timeout kills the whole session (mpiexec, its proxy, every rank), so a hang fails one test instead
of the whole run. run_mpi runs any Python command line on K ranks (`-m dpcore.bench ...`);
run_script runs a program from tests/scripts/ through `python -m mpi4py`, so an uncaught exception
on one rank aborts the job instead of leaving the other ranks waiting; run_python runs one with no
launcher. A test that launches mpiexec (run_mpi, run_script, run_ok, or a program that starts
mpiexec itself) is marked `mpi` (tests/README.md); run_mpi fails a test that is not.
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
# Whether the test now running is marked mpi (conftest.py sets it around each test; None outside
# one), so that a test that launches mpiexec without the mark fails instead of running under
# -m "not mpi".
current_test_marked_mpi = None


def find_mpiexec():
    """The mpiexec of this Python's MPI (pip's mpich puts it beside the interpreter); a PATH
    shim (pyenv) would also cost half a second per launch."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


MPIEXEC = find_mpiexec()


def run_python(argv, *, launcher=(), timeout=DEFAULT_TIMEOUT, env=None, cwd=None, check=True,
               status=0, stderr=subprocess.STDOUT):
    """Run `[launcher] python *argv` with this interpreter; return (returncode, output) with
    stdout and stderr merged (or stderr sent to the file descriptor `stderr`). With check=True,
    fail the test unless it exits with `status`.

    `env` adds to (and overrides) the environment; a value of None removes that variable.
    DPCORE_TIMEOUT defaults to 60 s there, so a library hang surfaces as a CommError well
    before the subprocess timeout."""
    full_env = dict(os.environ, DPCORE_TIMEOUT="60")
    full_env.update(env or {})
    full_env = {k: v for k, v in full_env.items() if v is not None}
    cmd = [*map(str, launcher), sys.executable, *map(str, argv)]
    # A new session, so a timeout can kill mpiexec and every rank it started, and nothing else.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, env=full_env,
                            cwd=cwd, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        output, _ = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} timed out after {timeout} s; output:\n{output}")
    if check and proc.returncode != status:
        pytest.fail(f"{' '.join(cmd)} exited with {proc.returncode} (expected {status}); "
                    f"output:\n{output}")
    return proc.returncode, output


def run_mpi(n, argv, *, mpiexec_args=(), wrapper=(), **kwargs):
    """run_python(argv) on n ranks: `mpiexec [mpiexec_args] -n n [wrapper] python *argv`.
    `wrapper` goes between mpiexec's arguments and the Python command (e.g.
    scripts/as_child.py); the keyword arguments are run_python's."""
    if current_test_marked_mpi is False:
        pytest.fail("this test launches mpiexec: mark it mpi (@pytest.mark.mpi)")
    if MPIEXEC is None:
        pytest.fail("mpiexec not found: pip install mpich (or put an MPI's mpiexec on PATH)")
    return run_python(argv, launcher=[MPIEXEC, *mpiexec_args, "-n", n, *wrapper], **kwargs)


def run_script(script, n, *args, **kwargs):
    """Run tests/scripts/<script> (or the script at a path) on n ranks through
    `python -m mpi4py`; the keyword arguments are run_mpi's."""
    return run_mpi(n, ["-m", "mpi4py", SCRIPTS / script, *args], **kwargs)


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
    """{rank: rest of line} for the lines 'rank R: TAG rest' the ranks printed (each rank's
    last)."""
    return {r: lines[-1] for r, lines in rank_lines_all(output, tag).items()}


def rank_lines_all(output, tag):
    """{rank: [rest of line, ...]} for every line 'rank R: TAG rest', in order."""
    found = {}
    for r, rest in re.findall(rf"^rank (\d+): {tag} (.*)$", output, re.MULTILINE):
        found.setdefault(int(r), []).append(rest)
    return found


def remove_mpi_shm_leftovers(output):
    """MPICH unlinks its own /dev/shm segments in MPI_Finalize, which a killed rank, or one that
    leaves with os._exit or an abort, never reaches. The ranks listed the segments they had
    mapped ('rank R: mpi shm NAMES', fault_kit.mpi_shm_segments); the job is over, so remove
    whichever are still there."""
    for names in rank_lines(output, "mpi shm").values():
        for name in names.split():
            if name.startswith("mpich_shm"):
                Path("/dev/shm", name).unlink(missing_ok=True)
