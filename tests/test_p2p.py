"""Point-to-point (send, recv, isend, irecv, batch): exact results on every transport
(scripts/p2p.py), staged through the mailboxes where ranks may not read each other's memory, on
CUDA arrays under the emulation (scripts/p2p_device.py); and its failures (scripts/
p2p_faults.py): a send that meets the wrong receive, a send or receive whose peer never comes,
a peer that dies. Each is a CommError on both ranks of the pair naming the op and the peer, and
the communicator is then broken on every rank. The autouse fixture in conftest.py checks that
nothing is left in /dev/shm."""
import re
import sys

import pytest

from mpi_helpers import (SCRIPTS, rank_lines, remove_mpi_shm_leftovers, run_mpi, run_ok,
                         run_script)
from transport_configs import CONFIGS, EACH_PATH

pytestmark = pytest.mark.mpi


# Point-to-point has two engines (dpcore/setup/p2p_channel.py): shared-memory mailboxes, and
# MPI's Isend/Irecv, which every transport between nodes uses alike: the nodes-of-* configs
# would run mpi-K's engine again.
ENGINES = {k: c for k, c in CONFIGS.items() if c.transport in ("shm", "mpi")}


@pytest.mark.parametrize("config", ENGINES.values(), ids=ENGINES)
def test_send_recv_exact(config):
    """Every dtype and count between every ordered pair, 8 B and 16 MiB, tags, any source, ring
    exchanges, the batch, 300 messages in a row; with one rank, only the argument errors."""
    run_ok("p2p.py", config.ranks, env=config.env)


def test_large_messages_staged_through_the_mailboxes():
    """Where ranks may not read each other's memory, large messages go in pieces."""
    run_ok("p2p.py", 3, env={"DPCORE_READ_PEERS": "0"})


@pytest.mark.parametrize("n", [2, 3])
def test_cuda_arrays_under_the_emulation(n):
    run_ok("p2p_device.py", n, env={"DPCORE_CUDA_EMULATION": "1"})


def faults(fault, n, config_env, timeout="60"):
    """The output of p2p_faults.py FAULT on n ranks: every rank's pid, errors and what the
    barrier after said."""
    env = {**config_env, "DPCORE_TIMEOUT": timeout}
    _, output = run_mpi(n, [SCRIPTS / "p2p_faults.py", fault], env=env, timeout=90, check=False,
                        mpiexec_args=["-disable-auto-cleanup"],
                        wrapper=[sys.executable, str(SCRIPTS / "as_child.py")])
    remove_mpi_shm_leftovers(output)
    return output


def assert_broken_everywhere(output, survivors):
    again = rank_lines(output, "again")
    assert set(again) == set(survivors), f"a broken communicator accepted work:\n{output}"


MISMATCH = {k: c for k, c in EACH_PATH.items() if k in ("shm-2", "shm-3", "mpi-3",
                                                        "nodes-of-2-x2")}


@pytest.mark.parametrize("fault, sent, expected", [
    ("size", "tag 0, 40 bytes", "tag 0, 32 bytes"),
    ("tag", "tag 0, 32 bytes", "tag 3, 32 bytes"),
    ("large", "tag 0, 40000 bytes", "tag 0, 32000 bytes")])
@pytest.mark.parametrize("config", MISMATCH.values(), ids=MISMATCH)
def test_a_send_that_meets_the_wrong_recv_fails_both(config, fault, sent, expected):
    n = config.ranks
    output = faults(fault, n, config.env)
    errors = rank_lines(output, "error")
    assert set(errors) == {0, 1}, output
    for line in errors.values():
        message = line.split(" | ", 1)[1]
        assert message == (f"dpcore send #1 from rank 0 to rank 1 ({sent} of float32) met recv "
                           f"#1 on rank 1 expecting {expected} of float32: every send must meet "
                           f"a receive of the same tag, size and dtype"), output
    assert_broken_everywhere(output, range(n))


TIMEOUTS = {k: c for k, c in EACH_PATH.items() if k in ("shm-2", "shm-3", "mpi-3")}


@pytest.mark.parametrize("fault, who, waits", [("send", 0, "rank 1 to receive it"),
                                               ("recv", 1, "rank 0 to send")])
@pytest.mark.parametrize("config", TIMEOUTS.values(), ids=TIMEOUTS)
def test_a_peer_that_never_comes_times_out(config, fault, who, waits):
    """The op fails at the timeout (1 s), naming the peer; the others' next call fails too."""
    n = config.ranks
    output = faults(fault, n, config.env, timeout="1")
    errors = rank_lines(output, "error")
    assert set(errors) == {who}, output
    seconds, message = errors[who].split(" | ", 1)
    assert 1 <= float(seconds) < 5, output
    assert re.fullmatch(rf"dpcore (send|recv) #1 .*: timed out after 1 s waiting for {waits}",
                        message), output
    assert_broken_everywhere(output, range(n))


@pytest.mark.parametrize("config", TIMEOUTS.values(), ids=TIMEOUTS)
def test_a_peer_that_dies_is_reported_within_a_second(config):
    """Rank 1 SIGKILLs itself 0.5 s into rank 0's receive from it (and rank 2's send to it)."""
    n = config.ranks
    output = faults("die", n, config.env)
    pid = int(rank_lines(output, "pid")[1])
    errors = rank_lines(output, "error")
    survivors = [r for r in range(n) if r != 1]
    assert set(errors) == set(survivors), output
    for line in errors.values():
        seconds, message = line.split(" | ", 1)
        assert float(seconds) < 0.5 + 1.5, output
        assert f"rank 1 (pid {pid}) died" in message, output
    assert_broken_everywhere(output, survivors)


@pytest.mark.parametrize("n", [2, 3])
def test_a_peer_that_closed_is_reported_at_once(n):
    """On shared memory, rank 1 closes its communicator 0.5 s into rank 0's receive from it.
    (Over MPI the receive waits for its timeout: MPI tells no departure.)"""
    output = faults("close", n, {})
    errors = rank_lines(output, "error")
    assert set(errors) == {0}, output
    seconds, message = errors[0].split(" | ", 1)
    assert float(seconds) < 0.5 + 1.5, output
    assert message == ("dpcore recv #1 on rank 0 (from rank 1, tag 0, 12 bytes of float32): "
                       "rank 1 closed its communicator"), output
    assert_broken_everywhere(output, [r for r in range(n) if r != 1])


def test_the_ping_pong_benchmark_runs():
    """benchmarks/ping_pong.py prints a row per size with positive numbers, its floor (one
    process_vm_readv) last (no time asserted)."""
    script = SCRIPTS.parent.parent / "benchmarks" / "ping_pong.py"
    _, output = run_script(script, 2, "-e", "256K", "--iters", "5", "--runs", "2", "--floor")
    table = re.findall(r"^\s*(\d+)((?:\s+[\d.]+){5})\s+([\d.]+)-([\d.]+)\s+([\d.]+)\s*$",
                       output, re.MULTILINE)
    assert [int(r[0]) for r in table] == [8, 65536, 262144], output
    for row in table:
        assert all(float(v) > 0 for v in (*row[1].split(), *row[2:])), output
