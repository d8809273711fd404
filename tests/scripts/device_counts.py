"""What the device transport's kernels move for a ring all_reduce, counted at each launch
(Communicator.device_counts; the same counts on a GPU as here on the emulation): per rank and
call, the kernels, the host's waits for them, the bytes they read and write, and the share of
those that went through 16-byte packs. Every rank prints 'rank R: counts JSON' per count, then 'rank R: ok'.

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
for dtype, count in cases:
    x = emulated.asarray(np.ones(count, dtype))
    before = comm.device_counts() or {}
    comm.all_reduce(x, algo="ring")
    after = comm.device_counts()
    say(comm.rank, "counts " + json.dumps(
        {"count": count, "itemsize": np.dtype(dtype).itemsize,
         **{k: v - before.get(k, 0) for k, v in after.items()}}))
comm.close()
say(comm.rank, "ok")
