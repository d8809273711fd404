"""Issue 16: a peer that dies or stalls at any point, on any transport, becomes a CommError on
every survivor, naming it, within seconds (API.md, Errors), and leaves nothing in /dev/shm; calls
from two threads on one communicator are refused, never paired wrongly across ranks.

test_faults.py checks deaths on shared memory; these check the rest:

- a rank that is SIGKILLed, raises, sys.exit()s or closes its communicator while the others are in
  an all_reduce over MPI (alone, or between virtual nodes): every survivor's CommError names it
  within BOUND seconds of the death, with DPCORE_TIMEOUT=60, so a timeout does not pass;
- a rank SIGKILLed before or inside dpcore.init() and comm.alloc(): the survivors raise within
  BOUND seconds, naming it, and no /dev/shm/dpcore-* of the job stays;
- a rank SIGSTOPped in an all_reduce (DPCORE_TIMEOUT=5): every other rank's CommError names it
  (not a ring neighbour that waits for it too), and once it goes on it fails too, never reporting
  success for a call its peers abandoned;
- two threads calling same-shaped all_reduces at once on one communicator.

The scripts (tests/scripts/peer_*.py, two_threads.py; fault_kit.py) print what each rank saw; a
rank still waiting fault_kit.GRACE seconds after the fault is killed by its watchdog and reported
as a hang, so a test that fails today costs about GRACE seconds, not the subprocess timeout.
"""
import os
import re
import sys
import time
from pathlib import Path

import pytest

from mpi_helpers import SCRIPTS, rank_lines, remove_mpi_shm_leftovers, run_mpi, run_script
from transport_configs import BETWEEN_NODES, SHM, Config

pytestmark = pytest.mark.mpi

BOUND = 5.0  # seconds from a death to every survivor's error
STALL_TIMEOUT = 5  # DPCORE_TIMEOUT where a rank stalls
LAUNCH_TIMEOUT = 150  # the subprocess, a last resort: the scripts' watchdogs come first
DEV_SHM = Path("/dev/shm")


# -- launching and reading -------------------------------------------------------------------

def launch(script, n, *args, env=None):
    """Run tests/scripts/<script> on n ranks as plain `python` (no `-m mpi4py`: an uncaught
    exception must not become MPI_Abort) under as_child.py, with -disable-auto-cleanup, so the
    survivors of a death live on to report. Returns (output, leftovers): leftovers are the
    /dev/shm/dpcore-* segments that ranks of this job created and nobody removed; they are
    removed here, so that they fail this test, clearly, and not the next ones."""
    before = _dpcore_segments()
    _, output = run_mpi(n, [SCRIPTS / script, *map(str, args)],
                        mpiexec_args=["-disable-auto-cleanup"],
                        wrapper=[sys.executable, SCRIPTS / "as_child.py"],
                        env=env, timeout=LAUNCH_TIMEOUT, check=False)
    remove_mpi_shm_leftovers(output)
    return output, _remove_job_segments(output, before)


def _dpcore_segments():
    return {p.name for p in DEV_SHM.glob("dpcore-*")}


def _remove_job_segments(output, before):
    """The dpcore segments that appeared and were created by a rank of this job (the name starts
    with dpcore-PID-: another job running meanwhile may have its own); removed."""
    pids = {int(p) for p in rank_lines(output, "pid").values()}
    deadline = time.monotonic() + 3  # a rank may still be on its way out
    while True:
        left = sorted(name for name in _dpcore_segments() - before
                      if int(name.split("-")[1]) in pids)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for name in left:
        try:
            os.unlink(DEV_SHM / name)
        except FileNotFoundError:
            pass
    return left


def outcomes(output):
    """{rank: (kind, seconds, message)}, kind "error" or "hang" (fault_kit's lines)."""
    found = {}
    for r, kind, seconds, message in re.findall(r"^rank (\d+): (error|hang) (\S+) \| (.*)$",
                                                output, re.MULTILINE):
        found.setdefault(int(r), (kind, float(seconds), message))
    return found


def blamed(message):
    """The ranks a message names, leaving out the prefixes that say where it was raised
    ('dpcore all_reduce #3 on rank 2: ', 'dpcore init on rank 2: ', also quoted inside another
    rank's message)."""
    text = re.sub(r"dpcore \w+( #\d+)? on rank \d+: ", "", message)
    ranks = set()
    for group in re.findall(r"\branks? (\d+(?:(?:,| and|, and) \d+)*)", text):
        ranks.update(int(r) for r in re.findall(r"\d+", group))
    return ranks


def check_survivors(output, survivors, culprit, bound, types=("CommError",), coll="all_reduce"):
    """Every survivor reported an error of one of `types` within `bound` seconds of the fault,
    whose message names `culprit` and no other rank (and, for a CommError where `coll` is given,
    starts 'dpcore COLL #N on rank R: '); returns the problems, one line each."""
    seen = outcomes(output)
    problems = []
    for r in survivors:
        if r not in seen:
            problems.append(f"rank {r}: no report")
            continue
        kind, seconds, message = seen[r]
        if kind == "hang":
            problems.append(f"rank {r}: hung ({seconds:.1f} s after the fault, then killed)")
            continue
        kind_of = message.split(":", 1)[0]
        if kind_of not in types:
            problems.append(f"rank {r}: {kind_of}, expected {' or '.join(types)}: {message}")
        if (coll and kind_of == "CommError"
                and not re.match(rf"CommError: dpcore {coll} #\d+ on rank {r}: ", message)):
            problems.append(f"rank {r}: the message does not say where: {message}")
        if blamed(message) != {culprit}:
            problems.append(f"rank {r}: names ranks {sorted(blamed(message))}, expected only "
                            f"rank {culprit}: {message}")
        if not seconds < bound:
            problems.append(f"rank {r}: {seconds:.2f} s after the fault (bound {bound} s): "
                            f"{message}")
    return problems


def settings(config, timeout):
    return {**config.settings, "DPCORE_TIMEOUT": str(timeout)}


# -- a peer dies while the others are in an all_reduce, over MPI -----------------------------

def survivors_name_rank_1(config, fault, when, tmp_path, coll="all_reduce"):
    """peer_dies.py: every survivor's CommError names rank 1 within BOUND s, and nothing of the
    job stays in /dev/shm."""
    output, leftovers = launch("peer_dies.py", config.ranks, fault, when, tmp_path, coll,
                               env=settings(config, 60))
    survivors = [r for r in range(config.ranks) if r != 1]
    problems = check_survivors(output, survivors, 1, BOUND, coll=coll)
    if leftovers:
        problems.append(f"left in /dev/shm: {leftovers}")
    assert not problems, "\n".join(problems) + f"\noutput:\n{output}"


OVER_MPI = {k: BETWEEN_NODES[k] for k in ("mpi-2", "mpi-3", "nodes-of-2-x2", "nodes-of-1-x2")}
DEATHS = [("kill", "waiting"), ("kill", "during"), ("raise", "waiting"), ("exit", "waiting"),
          ("close", "waiting")]


@pytest.mark.parametrize("fault, when", DEATHS, ids=[f"{f}-{w}" for f, w in DEATHS])
@pytest.mark.parametrize("config", OVER_MPI.values(), ids=OVER_MPI)
def test_dead_peer_over_mpi_is_named_within_seconds(config, fault, when, tmp_path):
    """Rank 1 dies (SIGKILL, an uncaught exception, sys.exit(3)) or closes its communicator and
    lives on, while the others wait in all_reduce #3 ('waiting') or while its own ring
    all_reduces are in flight ('during'). With DPCORE_TIMEOUT=60 every survivor must raise a
    CommError 'dpcore all_reduce #N on rank R: ...' naming rank 1 (and no other rank) within 5 s
    of the death: MPICH never reports a dead process, so dpcore must notice it itself."""
    survivors_name_rank_1(config, fault, when, tmp_path)


REDUCE_DEATHS = {k: c for k, c in {**SHM, **OVER_MPI}.items()
                 if k in ("shm-3", "mpi-3", "nodes-of-2-x2")}


@pytest.mark.parametrize("when", ["waiting", "during"])
@pytest.mark.parametrize("config", REDUCE_DEATHS.values(), ids=REDUCE_DEATHS)
def test_dead_peer_in_a_reduce_is_named_within_seconds(config, when, tmp_path):
    """The same, with the others in ring reduces to rank 0 (rank 1 is mid-chain, on 3 ranks
    between root 0 and rank 2): a CommError 'dpcore reduce #N on rank R: ...' naming rank 1."""
    survivors_name_rank_1(config, "kill", when, tmp_path, coll="reduce")


# -- a peer dies while the others are in an all_reduce on CUDA arrays ------------------------

ON_DEVICE = {f"cuda-emulated-{k}": Config(k, {"DPCORE_CUDA_EMULATION": "1"}) for k in (2, 3)}
DEVICE_DEATHS = [("kill", "waiting"), ("kill", "during"), ("close", "waiting")]


@pytest.mark.parametrize("fault, when", DEVICE_DEATHS, ids=[f"{f}-{w}" for f, w in DEVICE_DEATHS])
@pytest.mark.parametrize("config", ON_DEVICE.values(), ids=ON_DEVICE)
def test_dead_peer_on_the_device_is_named_within_seconds(config, fault, when, tmp_path):
    """The same deaths on the device transport (its CPU emulation): its host side waits as the
    shared-memory transport does, so the survivors' CommError names rank 1 within 5 s too, and
    nothing stays in /dev/shm, the emulated device's segments included."""
    survivors_name_rank_1(config, fault, when, tmp_path)


# -- a rank is killed in init or alloc --------------------------------------------------------

EARLY_CONFIGS = {"shm-2": SHM["shm-2"], "shm-3": SHM["shm-3"], "mpi-3": BETWEEN_NODES["mpi-3"],
                 "nodes-of-2-x2": BETWEEN_NODES["nodes-of-2-x2"]}
# (point, victim, configurations): init-segment kills the creator of node 0's segment (local
# rank 0); alloc-segment needs buffers in shared memory (one node, transport shm)
EARLY_POINTS = [("init", 1, EARLY_CONFIGS), ("init-connect", 1, EARLY_CONFIGS),
                ("init-segment", 0, ("shm-2", "shm-3", "nodes-of-2-x2")),
                ("alloc", 1, EARLY_CONFIGS), ("alloc-segment", 1, ("shm-2", "shm-3"))]
EARLY = [pytest.param(EARLY_CONFIGS[c], point, victim, id=f"{c}-{point}")
         for point, victim, configs in EARLY_POINTS for c in configs]


@pytest.mark.parametrize("config, point, victim", EARLY)
def test_rank_killed_in_init_or_alloc_is_named_within_seconds(config, point, victim, tmp_path):
    """A rank is SIGKILLed right before dpcore.init() or comm.alloc() while the others are inside
    it, or inside them at a fixed point (see peer_dies_early.py). Every survivor must raise
    (CommError, or RuntimeError from the bootstrap) naming the dead rank, and no other, within 5 s
    of the death, from init, alloc or the all_reduce after them; no segment of the job may stay
    in /dev/shm. DPCORE_TIMEOUT=60."""
    output, leftovers = launch("peer_dies_early.py", config.ranks, point, victim, tmp_path,
                               env=settings(config, 60))
    if "no hook" in output:
        pytest.fail(f"peer_dies_early.py cannot reach {point}: update its HOOKS\n{output}")
    assert "not killed" not in output, f"{point} never came in this configuration:\n{output}"
    survivors = [r for r in range(config.ranks) if r != victim]
    # init and alloc are no collectives with a number: any wording, as long as it names the rank
    problems = check_survivors(output, survivors, victim, BOUND,
                               types=("CommError", "RuntimeError"), coll=None)
    if leftovers:
        problems.append(f"left in /dev/shm: {leftovers}")
    assert not problems, "\n".join(problems) + f"\noutput:\n{output}"


# -- a rank stalls --------------------------------------------------------------------------

STALL_CONFIGS = {"shm-3": SHM["shm-3"], "mpi-3": BETWEEN_NODES["mpi-3"]}


@pytest.mark.parametrize("when", ["before", "during"])
@pytest.mark.parametrize("config", STALL_CONFIGS.values(), ids=STALL_CONFIGS)
def test_stalled_rank_is_blamed_by_all_and_fails_when_it_goes_on(config, when, tmp_path):
    """Rank 0 SIGSTOPs itself before or in the middle of a 128 MiB ring all_reduce at 3 ranks,
    DPCORE_TIMEOUT=5 (see peer_stalls.py). Ranks 1 and 2 must raise a CommError naming rank 0 and
    no other rank (rank 2 receives from rank 1, which waits for rank 0: blaming rank 1 is wrong),
    at about the timeout. Rank 1 then SIGCONTs rank 0, which must raise a CommError as well, and
    must not have finished any call that another rank failed."""
    output, leftovers = launch("peer_stalls.py", 3, when, tmp_path,
                               env=settings(config, STALL_TIMEOUT))
    problems = check_survivors(output, [1, 2], 0, STALL_TIMEOUT + 5)
    seen = outcomes(output)
    kind, _, message = seen.get(0, ("no report", 0, ""))
    if kind != "error" or not message.startswith("CommError: "):
        problems.append(f"rank 0: after SIGCONT: {kind} {message}")
    succeeded = {r: int(k) for r, k in rank_lines(output, "succeeded").items()}
    if len(succeeded) == 3 and succeeded[0] > min(succeeded[1], succeeded[2]):
        problems.append(f"rank 0 finished {succeeded[0]} all_reduces, the others "
                        f"{succeeded[1]} and {succeeded[2]}: it reported success for a call "
                        f"they abandoned")
    if leftovers:
        problems.append(f"left in /dev/shm: {leftovers}")
    assert not problems, "\n".join(problems) + f"\noutput:\n{output}"


# -- two threads on one communicator ----------------------------------------------------------

THREAD_CONFIGS = {"shm-2": SHM["shm-2"], "mpi-2": BETWEEN_NODES["mpi-2"],
                  "nodes-of-2-x2": BETWEEN_NODES["nodes-of-2-x2"]}


@pytest.mark.parametrize("config", THREAD_CONFIGS.values(), ids=THREAD_CONFIGS)
def test_two_threads_on_one_communicator_are_refused_never_mispaired(config):
    """Two threads of every rank call same-shaped all_reduces at the same moment, 50 times, each
    thread with its own values (two_threads.py). No result may be wrong (a call of thread 0 on
    one rank paired with one of thread 1 on another), and the communicator must say, in an error
    that mentions threads, that it serves one thread at a time. A CommError is allowed where a
    peer refused its side of a call."""
    _, output = run_script("two_threads.py", config.ranks, env=settings(config, 10),
                           timeout=LAUNCH_TIMEOUT, check=False)
    remove_mpi_shm_leftovers(output)
    problems = []
    finished = {int(r) for r in re.findall(r"^rank (\d+): finished$", output, re.MULTILINE)}
    if finished != set(range(config.ranks)):
        problems.append(f"ranks {sorted(set(range(config.ranks)) - finished)} did not finish")
    if "stuck" in output:
        problems.append("a thread was still in a call after 120 s")
    for r, t, calls, wrong in re.findall(r"^rank (\d+): thread (\d) calls (\d+) right \d+ "
                                         r"wrong (\d+)$", output, re.MULTILINE):
        if int(wrong):
            problems.append(f"rank {r} thread {t}: {wrong} of {calls} results wrong")
    errors = re.findall(r"^rank (\d+): thread (\d) error (\w+): (.*)$", output, re.MULTILINE)
    if not any("thread" in message.lower() for *_, message in errors):
        problems.append("no error mentions threads")
    for r, t, kind, message in errors:
        if kind not in ("CommError", "ValueError", "RuntimeError"):
            problems.append(f"rank {r} thread {t}: {kind}: {message}")
    assert not problems, "\n".join(problems) + f"\noutput:\n{output}"
