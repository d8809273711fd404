"""The CUDA path end to end where there is no GPU: CUDA arrays (dpcore.emulated) through the
device transport (csrc/cuda/device_transport.h) on the CPU emulation of the device, whose kernels
are the very bodies nvcc compiles (test_device_kernels.py checks those alone). Every collective
and algorithm against NumPy exactly and bit for bit against the host path, at 1-4 ranks, with
ring segments from 64 KiB down to 64 bytes; direct on comm.alloc(device="cuda") buffers and on
registered ordinary ones (comm.register); bad input; and the ring's schedule, which must be the one tests/test_ring_schedule.py checks on the
CPU. Deaths on the device transport are in
test_peer_faults.py. tests/gpu/device_check.sh runs the same script on a GPU (DEVICE=cupy)."""
import json
import re

import pytest

import dpcore
from mpi_helpers import (rank_lines, rank_lines_all, remove_mpi_shm_leftovers, run_ok,
                         run_python, run_script)

pytestmark = pytest.mark.mpi

EMULATED = {"DPCORE_CUDA_EMULATION": "1"}


# 4 ranks share 2 cores with their emulated kernels' threads: counts up to 1009 there, the
# ring's many segments at 2 and 3 ranks, through 16 KiB slots (the script's largest count is
# three segments a rank whatever the slot). 2026-12-07: 12-13 s, 6-7 s and 7-8 s at 2, 3 and 4
# ranks, since the host's waits leave the cores to the emulated device (cuda/device.h:
# onHostCores); 3 and 4 ranks took 17-23 s and 4-25 s before.
@pytest.mark.parametrize("n, mode", [(1, ["all"]), (2, ["all"]), (3, ["few"]),
                                     (4, ["few", "small"])])
def test_collectives_on_device_arrays(n, mode):
    output = run_ok("device_collectives.py", n, *mode,
                    env={**EMULATED, "DPCORE_SLOT_BYTES": "16384"}, timeout=300)
    assert output.count("device emulated") == n


def test_many_rounds_through_tiny_slots():
    """64-byte slots, two per FIFO: thousands of rounds, each waiting for a slot the next rank
    has only just emptied. Two dtype x op pairs, 9 s where the eight of "few" took 22 (the
    slots' order does not depend on the pair); with the ring's drained await left out, 24-218
    of 1009 elements came out wrong in its ring calls (2026-12-07)."""
    run_ok("device_collectives.py", 3, "two", "small",
           env={**EMULATED, "DPCORE_SLOT_BYTES": "64", "DPCORE_FIFO_SLOTS": "2"}, timeout=300)


@pytest.mark.parametrize("n", [2, 3])
def test_what_the_kernels_move_is_counted(n):
    """Issue 25's design targets, counted (Communicator.device_counts), for an all_reduce:
    - the staged ring: a kernel per ring verb (the schedule the CPU computes), ordered by
      interprocess events, and one host wait per call, at its end (the target, none between
      steps: met; there was one after every kernel before); the bytes the kernels read and
      write against the copy floor's (docs/busbw.md: 2R + D): 1.6x on 2 ranks, 1.4x on 3 (the
      target, at most 1.7x: met); at least 99 % of them through 16-byte packs for every count,
      odd, prime or not a multiple of 16 elements, float32 and float16 (the target: met, since
      each segment sits in its slot at its own address modulo 16);
    - direct on buffers every peer maps, comm.alloc(device="cuda")'s and ordinary ones
      registered (comm.register, the zero copy of ordinary buffers): one kernel per call (the
      target: met), at most 1.1x the floor's bytes (met: 0.8x on 2 ranks, 0.6x on 3, as direct
      moves less than the ring the floor is drawn from), and the packs too."""
    from dpcore import _C
    from dpcore.bench.floor import floor_bytes

    output = run_ok("device_counts.py", n, env=EMULATED, timeout=120)
    packed, direct = {}, []
    for rank, lines in rank_lines_all(output, "counts").items():
        for line in lines:
            c = json.loads(line)
            count, size, moved = c["count"], c["itemsize"], c["bytes_read"] + c["bytes_written"]
            floor = 2 * floor_bytes("all_reduce", n, size * count)
            packed[rank, c["algo"], c["buffers"], size, count] = c["packed_bytes"] / moved
            if c["algo"] == "direct":
                direct.append((c["buffers"], round(moved / floor, 2)))
                assert c["kernels"] == 1 and c["host_waits"] == 1, c
                continue
            verbs = _C.ring_trace("all_reduce", count, rank, n, (64 << 10) // size, 0, [])
            assert c["kernels"] == len(verbs) and c["host_waits"] == 1, c
            assert round(moved / floor, 3) == {2: 1.6, 3: 1.4}[n], c
    assert len(packed) == 8 * n and len(direct) == 4 * n, (packed, direct)
    assert min(packed.values()) >= 0.99, packed
    assert packed[0, "ring", "ordinary", 4, 1024 * n] == 1.0, packed  # every chunk 4 KiB
    assert set(direct) == {(buffers, {2: 0.8, 3: 0.6}[n]) for buffers in ("alloc", "registered")}


@pytest.mark.parametrize("n", [2, 4])
def test_direct_on_buffers_every_peer_maps(n):
    """comm.alloc(..., device="cuda") buffers: direct reads the peers' data where it lies, one
    kernel a step (all_reduce: one kernel, writing into every output), with the ring's bits; on
    ordinary device buffers it is refused."""
    run_ok("device_direct.py", n, env=EMULATED, timeout=300)


@pytest.mark.parametrize("n", [2, 3])
def test_direct_on_registered_ordinary_buffers(n):
    """comm.register: every peer maps the allocation that holds an ordinary device buffer, and
    direct reads and writes it in place, with the ring's bits; a registration lets its array
    go only once no peer maps it (deregister, a dropped registration, close), and bad buffers
    are refused on every rank before anything is mapped."""
    run_ok("device_registered.py", n, env=EMULATED, timeout=120)


def test_the_emulation_aborts_a_free_of_memory_a_peer_maps():
    """What CUDA leaves undefined the stand-in must fail: with nothing keeping a dropped
    registration's array, rank 0 frees memory that rank 1 maps, and the emulation aborts it,
    saying so (device_registered.py without its guard)."""
    status, output = run_script("device_registered.py", 2, "unguarded", env=EMULATED,
                                check=False, timeout=60)
    remove_mpi_shm_leftovers(output)
    assert status != 0, output
    assert re.search(r"dpcore emulation: process \d+ freed device memory that process \d+ "
                     r"still maps", output), output


@pytest.mark.parametrize("n", [1, 2, 3])
def test_gather_scatter_and_all_to_all_on_device_arrays(n):
    """one_shot and auto on ordinary device buffers, direct and auto on comm.alloc ones; past
    one_shot on ordinary buffers, a ValueError that says to use comm.alloc."""
    run_ok("device_exchange.py", n, env=EMULATED, timeout=300)


def test_bad_input_is_refused_on_the_rank_that_made_it():
    run_ok("device_bad_input.py", 2, env=EMULATED)


def test_the_device_ring_runs_the_cpu_rings_schedule():
    """The verbs the device transport runs for a ring all_reduce (traced as each one ends) are
    those of algo/ring.h's schedule as the CPU computes it (_C.ring_trace), in order, on every
    rank: the device moves data by the same schedule the CPU ring tests check."""
    from dpcore import _C

    output = run_ok("device_collectives.py", 3, "trace", env=EMULATED)
    for rank, verbs in rank_lines(output, "verbs").items():
        segment = (64 << 10) // 4  # the emulation's slot, in float32 elements
        expected = [v for v, _, _ in _C.ring_trace("all_reduce", 3001, rank, 3, segment, 0, [])]
        assert json.loads(verbs) == expected, rank


def test_cuda_arrays_where_cuda_cannot_run_say_why():
    """Without the emulation, on a machine with no GPU (CI) or a build without CUDA, a call on
    CUDA arrays raises one line that says which."""
    if dpcore.build_info()["cuda_available"]:
        pytest.skip("this machine has a GPU")
    code = ("import numpy as np, dpcore\nfrom dpcore import emulated\n"
            "with dpcore.init() as comm:\n    comm.all_reduce(emulated.asarray(np.ones(3)))")
    status, output = run_python(["-c", code], check=False, env={"DPCORE_CUDA_EMULATION": None})
    assert status != 0
    assert "RuntimeError: dpcore: CUDA arrays need a " in output, output
