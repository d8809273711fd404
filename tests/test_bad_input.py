"""Bad local input raises TypeError/ValueError on that rank alone, before anything is sent:

- arguments (non-contiguous, unsupported dtype, wrong or read-only out, bad op, avg on
  integers, bad root, bad algo name): the script makes one rank at a time call wrongly and then
  runs a correct all_reduce on every rank, which would fail or hang had the bad call reached the
  peers;
- settings: every DPCORE_* is checked when it is loaded, and a timeout when init gets it (inf
  waits forever); the C++ transports refuse what they could not divide by or fit in /dev/shm;
- a closed communicator refuses alloc too, and dropped ones give their MPI communicators back.
"""
import math
import os
import re

import pytest

from dpcore import settings
from mpi_helpers import run_mpi, run_ok, run_python
from transport_configs import CONFIGS


@pytest.mark.mpi
@pytest.mark.parametrize("n", [1, 2, 3])
def test_bad_input_is_refused_locally_and_the_communicator_stays_usable(n):
    run_ok("bad_input.py", n)


# -- settings and timeouts -------------------------------------------------------------------

BAD_SETTINGS = [
    ("SLOT_BYTES", v) for v in ["0", "1", "3", "12", "-8", "1e11", "100000000000", "64k", "x"]
] + [("FIFO_SLOTS", v) for v in ["0", "1", "-3", "1000000", "two", "2.5"]] + [
    ("ONE_SHOT_BYTES", v) for v in ["-1", str(1 << 40), "abc"]] + [
    ("ONE_SHOT_MAX", v) for v in ["-1", "1.5", "lots"]] + [
    ("TIMEOUT", v) for v in ["0", "-1", "nan", "-inf", "abc", "1e-400"]] + [
    ("NODE_SIZE", v) for v in ["-1", "x", "1.5"]] + [
    ("TRANSPORT", v) for v in ["tcp", "SHM", "nccl"]] + [
    ("TUNE", v) for v in ["maybe", "2"]] + [
    ("EXPLAIN_AUTO", v) for v in ["maybe", "2"]]


@pytest.mark.parametrize("name, value", BAD_SETTINGS)
def test_a_bad_setting_is_refused_at_load_with_its_name_and_value(name, value):
    with pytest.raises(ValueError, match=re.escape(f"DPCORE_{name}={value}: ")):
        settings.load({f"DPCORE_{name}": value})


def test_good_settings_load_as_numbers_and_empty_ones_are_unset():
    got = settings.load({"DPCORE_SLOT_BYTES": "1000", "DPCORE_FIFO_SLOTS": "2",
                         "DPCORE_TIMEOUT": "inf", "DPCORE_ONE_SHOT_BYTES": "0",
                         "DPCORE_ONE_SHOT_MAX": "4096", "DPCORE_NODE_SIZE": "2",
                         "DPCORE_TRANSPORT": "mpi", "DPCORE_TUNE": "0",
                         "DPCORE_EXPLAIN_AUTO": "1", "DPCORE_TRACE": "t.json"})
    assert got == settings.Settings(timeout=math.inf, transport="mpi", node_size=2,
                                    trace="t.json", tune=False, fifo_slots=2, slot_bytes=1000,
                                    one_shot_bytes=0, one_shot_max=4096, explain_auto=True)
    names = ["SLOT_BYTES", "FIFO_SLOTS", "TIMEOUT", "ONE_SHOT_BYTES", "ONE_SHOT_MAX",
             "NODE_SIZE", "TRANSPORT", "TUNE", "EXPLAIN_AUTO", "TRACE"]
    assert settings.load({f"DPCORE_{n}": "" for n in names}) == settings.Settings()
    assert settings.load({"DPCORE_TIMEOUT": "1e13"}).timeout == 1e13


ONE_RANK_PROGRAM = r"""
import math, os, re
import numpy as np
from mpi4py import MPI
import dpcore
from dpcore import _C
from dpcore.setup.segments import fresh_name
from dpcore.setup.mpi_endpoint import endpoint

def refused(what, error, call, words):
    try:
        call()
    except error as e:
        assert re.search(words, str(e)), (what, str(e))
        return
    raise AssertionError(f"{what}: no {error.__name__}")

# timeouts: inf and past the clock's range wait as long as needed; nonsense is refused at init
for timeout in [math.inf, 1e13, None, 0.5]:
    with dpcore.init(timeout=timeout) as comm:
        assert comm.timeout == (300.0 if timeout is None else timeout), comm.timeout
        assert comm.all_reduce(np.arange(5, dtype=np.int32)).tolist() == list(range(5))
for bad in [0, -1, math.nan, -math.inf]:
    refused(f"timeout={bad}", ValueError, lambda: dpcore.init(timeout=bad), "timeout")
refused("timeout='5'", TypeError, lambda: dpcore.init(timeout="5"), "timeout")

# a closed communicator refuses alloc as it refuses collectives
comm = dpcore.init()
comm.close()
for what, call in [("alloc", lambda: comm.alloc(4)), ("all_reduce", lambda: comm.all_reduce(
        np.ones(2))), ("all_gather", lambda: comm.all_gather(np.ones(2))),
                   ("barrier", comm.barrier)]:
    refused(f"{what} after close", ValueError, call, "communicator is closed")

# the C++ transports refuse ring slots they cannot divide into (no SIGFPE)
name = lambda: fresh_name()[0]
for slots, slot_bytes in [(8, 0), (8, 3), (8, 12), (1, 4096), (0, 4096)]:
    refused(f"ShmBackend slots={slots} slot_bytes={slot_bytes}", ValueError,
            lambda: _C.ShmBackend(name(), True, 0, 1, slots, slot_bytes, 4096, True, 10.0, 100.0),
            "slot")
    refused(f"MpiBackend slots={slots} slot_bytes={slot_bytes}", ValueError,
            lambda: _C.MpiBackend(endpoint(MPI.COMM_SELF, [0], [0]), slots, slot_bytes, 10.0,
                                  False),
            "slot")

for spin_us in (-1.0, float("nan"), 2e6):
    refused(f"ShmBackend spin_us={spin_us}", ValueError,
            lambda: _C.ShmBackend(name(), True, 0, 1, 8, 4096, 4096, True, 10.0, spin_us),
            "spin_us")

# a segment larger than /dev/shm's free space is refused before it is made
fs = os.statvfs("/dev/shm")
free = fs.f_bavail * fs.f_frsize
huge = (free // 2 + (1 << 30)) // 8 * 8
refused("ShmBackend larger than /dev/shm", RuntimeError,
        lambda: _C.ShmBackend(name(), True, 0, 1, 2, huge, 4096, True, 10.0, 100.0), "/dev/shm")
refused("SharedBuffer larger than /dev/shm", RuntimeError,
        lambda: _C.SharedBuffer(1, 0, free + (1 << 30)).create(name()), "/dev/shm")
print("one rank ok")
"""


def test_timeouts_settings_and_closed_communicators_on_one_rank():
    """Without mpiexec: timeouts inf and 1e13 work, 0/-1/nan are refused at init; alloc after
    close() says the communicator is closed; the C++ transports refuse slots they cannot
    divide into, and segments that do not fit /dev/shm."""
    launcher_env = {k: None for k in os.environ
                    if k.startswith(("PMI_", "PMIX_", "HYDRA_", "MPI_LOCALNRANKS", "OMPI_"))}
    _, output = run_python(["-c", ONE_RANK_PROGRAM], env={**launcher_env, "DPCORE_TIMEOUT": None})
    assert "one rank ok" in output


BAD_SETTING_PROGRAM = """
import dpcore
from mpi4py import MPI
try:
    dpcore.init()
    print(f"rank {MPI.COMM_WORLD.rank}: accepted")
except ValueError as e:
    print(f"rank {MPI.COMM_WORLD.rank}: ValueError {e}")
"""


@pytest.mark.mpi
@pytest.mark.parametrize("name, value", [("SLOT_BYTES", "3"), ("SLOT_BYTES", "1"),
                                         ("FIFO_SLOTS", "0"), ("TIMEOUT", "0")])
def test_a_bad_setting_fails_init_on_every_rank_with_a_value_error(name, value):
    """Not a SIGFPE in the first ring collective, nor a timeout in every call: init raises."""
    _, output = run_mpi(2, ["-c", BAD_SETTING_PROGRAM], env={f"DPCORE_{name}": value},
                        timeout=60)
    for r in range(2):
        assert f"rank {r}: ValueError DPCORE_{name}={value}: " in output, output


TIMEOUT_CONFIGS = {k: CONFIGS[k] for k in ("shm-2", "mpi-2", "nodes-of-2-x2")}


@pytest.mark.mpi
@pytest.mark.parametrize("config", TIMEOUT_CONFIGS.values(), ids=TIMEOUT_CONFIGS)
def test_an_infinite_timeout_waits_as_long_as_needed_and_nonsense_is_refused(config):
    run_ok("timeouts.py", config.ranks, env={**config.env, "DPCORE_TIMEOUT": "inf"}, timeout=120)


@pytest.mark.mpi
def test_communicators_dropped_without_close_give_back_their_mpi_communicators():
    """800 of them: today's MPICH ran out after some 500."""
    run_ok("dropped.py", 2, 800, timeout=150)
