"""Failures become dpcore.CommError on every rank, quickly, and leave no shared memory behind
(the autouse fixture in conftest.py compares /dev/shm/dpcore-* before and after each test):

- ranks that call different collectives (name, count, dtype, op, root, algorithm), or a rank
  that never comes, on every transport;
- on shared memory: a rank that SIGKILLs itself, between or during collectives; a rank that
  stalls past the timeout; a rank that closes its communicator while the others wait for it.
"""
import re
import sys

import pytest

from mpi_helpers import SCRIPTS, rank_lines, remove_mpi_shm_leftovers, run_ok, run_script
from transport_configs import EACH_PATH

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("config", EACH_PATH.values(), ids=EACH_PATH)
def test_mismatched_calls_and_a_missing_rank_raise_on_every_rank(config):
    """Rank 0 calls something else than the others (blocking and async); every rank raises
    CommError with 'dpcore <its collective> #3 on rank <r>: mismatch: ...' naming the other
    side, and the broken communicator refuses more. A rank that never comes is named by every
    other rank's CommError once the timeout runs out. On every path alike."""
    n = config.ranks
    output = run_ok("mismatch.py", n, env=config.env)
    errors = re.findall(r"^rank (\d+): error (.+?) \| (.*)$", output, re.MULTILINE)
    reported = {}  # kind of fault: the ranks that reported it
    for r, kind, _ in errors:
        reported.setdefault(kind, set()).add(int(r))
    if n > 1:
        assert reported.pop("timeout") == set(range(1, n)), output  # rank 0 never came
        assert set(reported) == {"collective", "count", "dtype", "op", "root", "algo",
                                 "ring count", "reduce_scatter op", "reduce_scatter dtype",
                                 "async count", "reduce root", "reduce op", "gather root",
                                 "gather dtype", "scatter root", "all_to_all splits"}, output
        for kind, ranks in reported.items():
            assert ranks == set(range(n)), (kind, output)


@pytest.mark.parametrize("n, when", [(2, "between"), (3, "between"), (3, "during"),
                                     (4, "during")])
def test_killed_rank_is_reported_to_the_survivors(n, when):
    """The last rank SIGKILLs itself; each survivor raises CommError naming it (rank and pid)
    within seconds, far below the 60 s timeout, and the broken communicator then refuses work
    at once."""
    _, output = run_script("die.py", n, when, timeout=60, check=False,
                           mpiexec_args=["-disable-auto-cleanup"],
                           wrapper=[sys.executable, str(SCRIPTS / "as_child.py")])
    remove_mpi_shm_leftovers(output)
    victim = n - 1
    pids = {r: int(p) for r, p in rank_lines(output, "pid").items()}
    errors = rank_lines(output, "error")
    assert set(errors) == set(range(n - 1)), f"not every survivor reported; output:\n{output}"
    for r, line in errors.items():
        seconds, message = line.split(" | ", 1)
        assert float(seconds) < 15, f"rank {r} took {seconds} s to notice:\n{output}"
        assert re.match(rf"dpcore all_reduce #\d+ on rank {r}: ", message), message
        assert f"rank {victim} (pid {pids[victim]}) died" in message, message
    again = rank_lines(output, "again")
    assert set(again) == set(range(n - 1)), f"a broken communicator accepted work:\n{output}"


@pytest.mark.parametrize("when", ["between", "during"])
@pytest.mark.parametrize("coll", ["gather", "scatter", "all_to_all"])
def test_killed_rank_in_an_exchange_is_reported_to_the_survivors(coll, when):
    """The same for gather, scatter and all_to_all (direct: the survivors read the dead rank's
    memory, or wait for it at the end). gather learns the shard sizes first, in an all_gather
    of headers, which may be where the survivors hear of it."""
    _, output = run_script("die.py", 3, when, coll, timeout=60, check=False,
                           mpiexec_args=["-disable-auto-cleanup"],
                           wrapper=[sys.executable, str(SCRIPTS / "as_child.py")])
    remove_mpi_shm_leftovers(output)
    pids = {r: int(p) for r, p in rank_lines(output, "pid").items()}
    errors = rank_lines(output, "error")
    assert set(errors) == {0, 1}, f"not every survivor reported; output:\n{output}"
    names = f"({coll}|all_gather)" if coll == "gather" else coll
    for r, line in errors.items():
        seconds, message = line.split(" | ", 1)
        assert float(seconds) < 15, f"rank {r} took {seconds} s to notice:\n{output}"
        assert re.match(rf"dpcore {names} #\d+ on rank {r}: ", message), message
        assert f"rank 2 (pid {pids[2]}) died" in message, message
    assert set(rank_lines(output, "again")) == {0, 1}, output


@pytest.mark.parametrize("n, how", [(2, "init"), (3, "env")])
def test_stalled_rank_times_out_the_others(n, how):
    """The last rank sleeps past a 2 s timeout (dpcore.init(timeout=2), or DPCORE_TIMEOUT=2);
    the others raise CommError naming it after about 2 s; the late rank then fails at once."""
    timeout = 2
    _, output = run_script("stall.py", n, timeout, how, timeout=60,
                           env={"DPCORE_TIMEOUT": str(timeout) if how == "env" else "60"})
    late = n - 1
    errors = rank_lines(output, "error")
    assert set(errors) == set(range(n)), f"not every rank raised CommError; output:\n{output}"
    waited = []
    for r, line in errors.items():
        seconds, message = line.split(" | ", 1)
        assert re.match(rf"dpcore all_reduce #2 on rank {r}: ", message), message
        assert re.search(rf"timed out after .* waiting for rank.*\b{late}\b", message), message
        if r != late:
            waited.append(float(seconds))
    # the first to time out waited the whole timeout; the others heard of it at the same moment
    assert timeout - 0.1 < max(waited) and max(waited) < timeout + 8, output


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_that_closed_is_reported_at_once(n):
    """The last rank closes its communicator and stays alive; each other rank's next
    collective raises CommError naming it within seconds, far below the 60 s timeout."""
    output = run_ok("leave.py", n)
    errors = rank_lines(output, "error")
    assert set(errors) == set(range(n - 1)), output
    for r, line in errors.items():
        seconds, message = line.split(" | ", 1)
        assert float(seconds) < 15, f"rank {r} took {seconds} s to notice:\n{output}"
        assert re.match(rf"dpcore all_reduce #2 on rank {r}: ", message), message
        assert f"rank {n - 1} closed its communicator" in message, message


def test_a_survivor_that_ends_normally_after_a_failed_call_does_not_hang_in_finalize():
    """Issue 27: rank 0 leaves Python normally after its CommError while rank 1, whose call
    failed too, lingers and never finalizes MPI: rank 0's process ends within seconds
    (dpcore.comm.ending: MPI_Finalize gets GRACE_S), where it used to wait in MPI_Finalize for
    as long as rank 1 lived. (-disable-auto-cleanup: so that the launcher does not end rank 1,
    which watches rank 0's pid, when rank 0 ends without MPI_Finalize.)"""
    from dpcore.comm.ending import GRACE_S

    _, output = run_script("exit_after_failure.py", 2, mpiexec_args=["-disable-auto-cleanup"],
                           env={"DPCORE_TIMEOUT": "10"}, timeout=60, check=False)
    remove_mpi_shm_leftovers(output)
    assert "rank 0: error | dpcore all_reduce #1 on rank 0: mismatch" in output, output
    ended = rank_lines(output, "survivor ended after")
    assert 1 in ended and float(ended[1]) < GRACE_S + 3, output
