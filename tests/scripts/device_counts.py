"""What the device transport's kernels move for an all_reduce, counted at each launch
(Communicator.device_counts; the same counts on a GPU as here on the emulation): per rank and
call, the kernels, the host's waits for them, the bytes they read and write, and the share of
those that went through 16-byte packs: the ring on ordinary device buffers, and direct on
buffers every peer maps: comm.alloc(device="cuda")'s, and ordinary ones registered
(comm.register). Every rank prints 'rank R: counts JSON' per
call, then 'rank R: ok'.

Usage: DPCORE_CUDA_EMULATION=1 mpiexec -n K python device_counts.py
"""
import json

import numpy as np

import dpcore
from checks import say
from dpcore import emulated

comm = dpcore.init()
# float32: 1 MiB; one element more (odd); a prime count; one 4 KiB chunk per rank.
# float16: a prime count; an even count that is not a multiple of 16 elements.
cases = [(np.float32, count) for count in [1 << 18, (1 << 18) + 1, 1000003, 1024 * comm.size]]
cases += [(np.float16, count) for count in [1000003, (1 << 19) + 24]]


def count_one(x, algo, out=None, buffers="ordinary"):
    before = comm.device_counts() or {}
    comm.all_reduce(x, out=out, algo=algo)
    after = comm.device_counts()
    say(comm.rank, "counts " + json.dumps(
        {"algo": algo, "buffers": buffers, "count": x.size, "itemsize": x.dtype.itemsize,
         **{k: v - before.get(k, 0) for k, v in after.items()}}))


for dtype, count in cases:
    count_one(emulated.asarray(np.ones(count, dtype)), "ring")
# direct on mapped buffers: an odd count, into another buffer and in place
count = (1 << 18) + 1
x, out = (comm.alloc(count, np.float32, device="cuda") for _ in range(2))
count_one(x, "direct", out, "alloc")
count_one(x, "direct", x, "alloc")
x, out = (emulated.asarray(np.ones(count, np.float32)) for _ in range(2))
with comm.register(x), comm.register(out):
    count_one(x, "direct", out, "registered")
    count_one(x, "direct", x, "registered")
comm.close()
say(comm.rank, "ok")
