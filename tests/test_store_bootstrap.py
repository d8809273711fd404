"""Issue 15: dpcore.init(store=..., rank=R, size=N) with no MPI in the job, as a torch.distributed
backend is set up under torchrun: shared memory among the ranks of one host, exactly as under
mpiexec, and a clear error on every rank, never a hang, where only MPI would do.

Each rank is a plain Python process (tests/scripts/store_rank.py) in which mpi4py cannot be
imported. The collectives run on torch's own stores (a FileStore, and under torchrun the agent's
TCPStore); the faults and refusals on dir_store.DirStore, the same five calls without torch,
whose import would cost each rank about 4 s of CPU.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import dpcore
from mpi_helpers import SCRIPTS, kill_session, rank_lines


def _dir_store_class():
    """dir_store.DirStore, loaded without putting tests/scripts on this process's path."""
    spec = importlib.util.spec_from_file_location("dir_store", SCRIPTS / "dir_store.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DirStore


DirStore = _dir_store_class()

LAUNCH_TIMEOUT = 120  # a last resort: DPCORE_TIMEOUT=60 surfaces a hang first
BOUND = 5.0  # seconds from a death to every survivor's error
# what a launcher of MPI would have put in the environment: these processes have none
_NO_LAUNCHER = {k: None for k in os.environ if k.startswith(("PMI_", "PMIX_", "HYDRA_", "OMPI_"))}


def launch(mode, n, store, directory, env=None, torchrun=False, ranks=None, sizes=None):
    """Run store_rank.py MODE STORE DIR as n processes (or under torchrun), each in a session of
    its own, or only the ranks in `ranks`, rank r told the size sizes[r] (default n); returns
    their output, each process's lines together."""
    full = {**os.environ, "DPCORE_TIMEOUT": "60", **_NO_LAUNCHER, **(env or {})}
    full = {k: v for k, v in full.items() if v is not None}
    script = [SCRIPTS / "store_rank.py", mode, store, directory]
    if torchrun:
        # --standalone: a rendezvous on a free port (not 29500, which a concurrent job may hold)
        argv = [["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", n, *script]]
    else:
        argv = [[*script, r, n if sizes is None else sizes[r]]
                for r in (range(n) if ranks is None else ranks)]
    procs = [subprocess.Popen([sys.executable, *map(str, a)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=full, text=True,
                              start_new_session=True) for a in argv]
    deadline, output = time.monotonic() + LAUNCH_TIMEOUT, ""
    try:
        for p in procs:
            output += p.communicate(timeout=max(deadline - time.monotonic(), 1))[0]
    except subprocess.TimeoutExpired:
        for p in procs:
            kill_session(p.pid)
        pytest.fail(f"store_rank.py {mode} timed out after {LAUNCH_TIMEOUT} s; so far:\n{output}")
    return output


def ok_ranks(output):
    return {int(r) for r in re.findall(r"^rank (\d+): ok$", output, re.MULTILINE)}


needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch's stores need torch (CI installs it)")


@pytest.mark.slow
@pytest.mark.parametrize("store", [
    "dir", pytest.param("file", marks=[pytest.mark.torch, needs_torch])])
def test_collectives_on_a_store_match_numpy_without_mpi(store, tmp_path):
    """3 ranks on a store (torch's FileStore in a PrefixStore, or the test's own DirStore where
    torch is missing): all_reduce, reduce_scatter, all_gather and broadcast at sizes from 0 to
    100003 elements equal NumPy's exactly, comm.alloc gives shared buffers, close works, and a
    second communicator on the same store works too."""
    output = launch("collectives", 3, store, tmp_path)
    assert ok_ranks(output) == {0, 1, 2}, output


@pytest.mark.slow
@pytest.mark.torch
@needs_torch
def test_collectives_under_torchrun(tmp_path):
    """`torchrun --nproc-per-node 2`: the store of torch's env:// rendezvous, the same checks."""
    output = launch("collectives", 2, "env", tmp_path, torchrun=True)
    assert ok_ranks(output) == {0, 1}, output


@pytest.mark.slow
@pytest.mark.parametrize("mode, n, victim", [("die-after-hello", 3, 2),
                                             ("die-before-hello", 3, 2),
                                             ("die-creating-segment", 2, 0),
                                             ("exit", 2, 1)])
def test_a_rank_that_dies_or_exits_is_named_by_every_other_within_seconds(mode, n, victim,
                                                                           tmp_path):
    """A rank SIGKILLed inside init before its hello (it announced its pid first thing: issue
    27), once the pids were exchanged, or after it created the node's
    segment (which nobody may map now: the survivors remove it), or one that exits without
    closing its communicator while the others are in an all_reduce (it tells them at exit): every
    other rank raises a CommError naming it, and no other rank, within BOUND seconds
    (DPCORE_TIMEOUT=60)."""
    before = {p.name for p in os.scandir("/dev/shm") if p.name.startswith("dpcore-")}
    output = launch(mode, n, "dir", tmp_path)
    errors = rank_lines(output, "error")
    for r in set(range(n)) - {victim}:
        assert r in errors, f"rank {r} reported no error:\n{output}"
        seconds, message = errors[r].split(" | ", 1)
        assert float(seconds) < BOUND, f"rank {r} took {seconds} s:\n{output}"
        assert message.startswith("CommError: dpcore "), message
        named = set(map(int, re.findall(r"\brank (\d+) ", re.sub(r"on rank \d+", "", message))))
        assert named == {victim}, f"rank {r} names ranks {named}: {message}"
        if mode == "exit":  # told by dpcore's atexit hook (with no MPI): its pid goes 2.5 s later
            assert "closed its communicator" in message and float(seconds) < 1.5, errors[r]
    victim_pid = rank_lines(output, "pid")[victim]
    left = {p.name for p in os.scandir("/dev/shm") if p.name.startswith(f"dpcore-{victim_pid}-")}
    assert not left - before, f"the dead rank's segments stayed: {left}"


@pytest.mark.slow
@pytest.mark.parametrize("mode, env, kind, says", [
    ("refuse", {"DPCORE_TRANSPORT": "mpi"}, "ValueError", "DPCORE_TRANSPORT=mpi needs MPI"),
    ("other-host", {}, "RuntimeError", "2 hosts"),
], ids=["transport-mpi", "two-hosts"])
def test_what_needs_mpi_is_refused_on_every_rank(mode, env, kind, says, tmp_path):
    """With a store there is no MPI to carry bytes between hosts: DPCORE_TRANSPORT=mpi, or a rank
    on another host (rank 1's dpcore.setup.bootstrap.host_id is faked) make init raise on every rank,
    saying that MPI is needed and how to launch with it. (The other settings that need MPI:
    test_one_rank_on_a_store_and_bad_arguments.)"""
    output = launch(mode, 2, "dir", tmp_path, env=env)
    refused = rank_lines(output, "refused")
    assert set(refused) == {0, 1}, output
    for r, message in refused.items():
        assert message.startswith(f"{kind}: dpcore init on rank {r}: "), message
        assert says in message and "mpiexec" in message, message


@pytest.mark.slow
def test_a_rank_that_never_comes_is_named_when_the_timeout_runs_out(tmp_path):
    """Rank 0 of 2 alone, DPCORE_TIMEOUT=1: its CommError names rank 1 and the step."""
    output = launch("exit", 2, "dir", tmp_path, env={"DPCORE_TIMEOUT": "1"}, ranks=[0])
    message = rank_lines(output, "error")[0].split(" | ", 1)[1]
    assert message == ("CommError: dpcore init on rank 0: timed out after 1 s waiting for rank 1 "
                       "(exchange hosts and pids)"), output


@pytest.mark.slow
def test_ranks_given_different_sizes_are_told_so(tmp_path):
    """Rank 0 told size 2, rank 1 size 3: rank 0 sees it in the hello, and rank 1, which would
    wait for a rank 2 that never comes, hears it from rank 0; neither waits for the timeout."""
    output = launch("exit", 2, "dir", tmp_path, sizes=[2, 3])
    errors = {r: line.split(" | ", 1)[1] for r, line in rank_lines(output, "error").items()}
    says = "the ranks were given different sizes (rank 0: 2, rank 1: 3)"
    assert errors.get(0) == f"ValueError: dpcore init on rank 0: {says}", output
    assert errors.get(1, "").startswith("CommError: dpcore init on rank 1: rank 0 failed: "), output
    assert says in errors[1], output


@pytest.mark.slow
def test_the_trace_is_gathered_through_the_store(tmp_path):
    """DPCORE_TRACE on 2 ranks of a store: at exit rank 0 writes one Chrome trace with both
    ranks' lanes, their collectives in order and the ring's steps (test_trace.py checks the
    steps' order under mpiexec)."""
    path = tmp_path / "trace.json"
    output = launch("trace", 2, "dir", tmp_path, env={"DPCORE_TRACE": str(path)})
    assert ok_ranks(output) == {0, 1}, output
    events = json.loads(path.read_text())["traceEvents"]
    lanes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert lanes == {0, 1}, events
    for rank in (0, 1):
        spans = [e for e in events if e["ph"] == "X" and e["pid"] == rank]
        assert [e["name"] for e in spans if e["tid"] == 0] == ["all_reduce", "all_reduce",
                                                               "broadcast"]
        assert {e["args"]["seq"] for e in spans if e["tid"] == 1} == {1, 3}  # ring steps


def test_one_rank_on_a_store_and_bad_arguments(tmp_path, monkeypatch):
    """In this process: one rank on a store is a working communicator; DPCORE_NODE_SIZE, which
    needs MPI, is refused; a rank or size that is no int, a rank outside the size, a store
    beside an MPI communicator, or a rank without a store is refused before anything is
    sent."""
    store = DirStore(tmp_path / "store")
    with dpcore.init(store=store, rank=0, size=1) as comm:
        assert (comm.rank, comm.size, comm.transport) == (0, 1, "shm")
        assert comm.all_reduce(np.arange(5)).tolist() == [0, 1, 2, 3, 4]
    monkeypatch.setenv("DPCORE_NODE_SIZE", "1")
    with pytest.raises(ValueError, match="on rank 0: DPCORE_NODE_SIZE=1 needs MPI.*mpiexec"):
        dpcore.init(store=store, rank=0, size=1)
    monkeypatch.delenv("DPCORE_NODE_SIZE")
    with pytest.raises(TypeError, match="rank must be an int"):
        dpcore.init(store=store, rank="0", size=1)
    with pytest.raises(ValueError, match=r"rank 2 is not in \[0, 2\)"):
        dpcore.init(store=store, rank=2, size=2)
    with pytest.raises(ValueError, match="not both"):
        dpcore.init(object(), store=store, rank=0, size=1)
    with pytest.raises(ValueError, match="go with a store"):
        dpcore.init(rank=0, size=1)


class _GoneStore:
    """A store whose server went away (a TCPStore hosted by a rank that died): every call fails
    as torch's do."""

    def _gone(self, *args):
        raise RuntimeError("Connection reset by peer\nException raised from recvBytes at ...")

    set = get = check = add = delete_key = _gone


def test_a_store_gone_before_init_is_the_same_comm_error_as_other_init_failures():
    """Issue 27: init on a store that is gone fails as any init failure does: CommError "dpcore
    init on rank R: the store failed: ...", naming the step, torch's stack left out."""
    with pytest.raises(dpcore.CommError) as raised:
        dpcore.init(store=_GoneStore(), rank=1, size=2, timeout=5)
    assert str(raised.value) == ("dpcore init on rank 1: the store failed: RuntimeError: "
                                 "Connection reset by peer (exchange hosts and pids)")


@pytest.mark.slow
def test_a_rank_claimed_twice_is_told_so_within_seconds(tmp_path):
    """Issue 27: rank 1 started twice on a store of size 2. One pair initialises and works; the
    other process claiming rank 1 says so within seconds (DPCORE_TIMEOUT=60), naming no
    innocent rank."""
    output = launch("duplicate", 2, "dir", tmp_path, ranks=[0, 1, 1])
    ok = re.findall(r"^rank (\d+): ok$", output, re.MULTILINE)
    errors = re.findall(r"^rank (\d+): error (\S+) \| (.*)$", output, re.MULTILINE)
    assert sorted(ok) == ["0", "1"] and len(errors) == 1, output
    rank, seconds, message = errors[0]
    assert rank == "1" and float(seconds) < BOUND, output
    assert message.startswith("CommError: dpcore init on rank 1: rank 1 was claimed twice"), output


@pytest.mark.slow
def test_a_job_on_a_reused_store_takes_nothing_an_earlier_job_left(tmp_path):
    """Issue 27: a job's rank 1 alone on a store times out in its hello (DPCORE_TIMEOUT=1),
    leaving its counter one on and its hello unread; the next job's two ranks on the same store
    must meet each other, neither taking that hello nor blaming the earlier job's process."""
    first = launch("duplicate", 2, "dir", tmp_path, ranks=[1], env={"DPCORE_TIMEOUT": "1"})
    assert "timed out after 1 s waiting for rank 0" in first, first
    output = launch("duplicate", 2, "dir", tmp_path, env={"DPCORE_TIMEOUT": "10"})
    assert ok_ranks(output) == {0, 1}, output
