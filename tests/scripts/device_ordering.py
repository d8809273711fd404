"""What a GPU's asynchrony breaks, on the CPU emulation (DPCORE_CUDA_EMULATION=1), whose streams
run their work late (csrc/cuda/emulated_stream.h): each case fails where the device transport
leaves an ordering to luck. Run by tests/test_device_ordering.py.

  fill         comm.alloc(device="cuda") buffers read by the peers at once, rank 0's fills
               landing 50 ms late: they must have landed before the peers read
  peer-writes  direct reads the peers' comm.alloc buffers, which each rank has just written with
               set() on its own stream, rank 0's landing 50 ms late: they must have landed first
  async        an async call on the per-thread default stream (2) must follow the caller's
               stream, not the worker thread's
  free         a comm.alloc(device="cuda") buffer a step, the last one dropped: the regions every
               rank dropped are freed (and unmapped) at a later alloc, not kept to the end
  exit         rank 0's kernels start 0.3 s late; rank 1 closes and exits as soon as its call
               returns: its memory must stay until rank 0 has read it
  ring         the ring through two 1 KiB slots, the host waiting only at the call's end, rank
               1's stream 2-4 ms behind on every piece of work and the others' 0-0.5 ms, so that
               the fills outrun the drains: a kernel must not read a slot before the previous
               rank's kernel has filled it, nor fill one the next rank's kernel has not drained.
               (Uniform 0-2 ms delays everywhere caught a missing drained wait only while the
               host's waits starved the streams of cores, which they no longer do.)

Usage: mpiexec -n K python -m mpi4py device_ordering.py CASE
"""
import os
import sys

import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, say
from dpcore import emulated

case = sys.argv[1]
SLOW = {"fill": 50_000, "peer-writes": 50_000, "exit": 300_000}  # rank 0's delays, in us
if case in SLOW:  # read as the streams are made, at their first use
    slow = SLOW[case] if MPI.COMM_WORLD.rank == 0 else 0
    os.environ["DPCORE_EMULATION_DELAY_US"] = f"{slow}-{slow}"
if case == "ring":  # each slot used a dozen times a call, without a thousand slow kernels
    os.environ.update(DPCORE_EMULATION_DELAY_US="2000-4000" if MPI.COMM_WORLD.rank == 1
                      else "0-500", DPCORE_SLOT_BYTES="1024", DPCORE_FIFO_SLOTS="2")

comm = dpcore.init(timeout=30)
rank, size = comm.rank, comm.size
check = Checker(rank)
count = 4099
total = size * (size + 1) // 2  # the sum of rank + 1 over the ranks

if case == "fill":
    for i in range(6):
        x = comm.alloc(count, np.float32, device="cuda")
        out = comm.alloc(count, np.float32, device="cuda")
        comm.all_reduce(x, out=out, algo="direct")
        check.equal(out.get(), np.zeros(count, np.float32), f"the peers' fresh buffers, #{i}")
elif case == "peer-writes":
    x = comm.alloc(count, np.float32, device="cuda")
    out = comm.alloc(count, np.float32, device="cuda")
    for i in range(8):
        x.set(np.full(count, rank + 1 + i, np.float32))
        comm.all_reduce(x, out=out, algo="direct")
        check.equal(out.get(), np.full(count, total + size * i, np.float32), f"round {i}")
elif case == "async":
    x = emulated.empty(count, np.float32, stream=2)
    for i in range(8):
        x.set(np.full(count, rank + 1 + i, np.float32))
        y = comm.all_reduce(x, algo="one_shot", async_op=True).wait()
        check.equal(y.get(), np.full(count, total + size * i, np.float32), f"round {i}")
elif case == "free":
    def mapped():  # the emulated device memory mapped here: each region's, each peer's
        with open("/proc/self/maps") as maps:
            return sum("-emulated-" in line for line in maps)

    counts = []
    for i in range(12):
        x = comm.alloc(1 << 16, np.float32, device="cuda")
        x.set(np.full(1 << 16, rank + i, np.float32))
        comm.all_reduce(x, out=x, algo="direct")
        check.equal(x.get()[:3], np.full(3, total - size + size * i, np.float32), f"step {i}")
        del x
        counts.append(mapped())
    check.true(counts[-1] <= counts[2], f"mappings after each step: {counts}")
elif case == "ring":
    x = emulated.empty(count, np.float32)
    for i in range(4):
        x.set(np.full(count, rank + 1 + i, np.float32))
        y = comm.all_reduce(x, algo="ring")
        check.equal(y.get(), np.full(count, total + size * i, np.float32), f"round {i}")
elif case == "exit":
    y = comm.all_reduce(emulated.asarray(np.full(count, rank + 1, np.float32)), algo="one_shot")
    check.equal(y.get(), np.full(count, total, np.float32), "the sum")
else:
    raise SystemExit(f"no case {case}")

comm.close()
if case == "exit":  # no collective at the end: rank 1 must be free to go at once
    for f in check.failures:
        say(rank, f"FAIL {f}")
    if check.failures:
        sys.exit(1)
    say(rank, "ok")
else:
    check.finish()
