"""Bandwidth of dpcore's CUDA reduce kernel beside CuPy's `cupy.add(a, b, out=c)` on the same
buffers, in the same run (median of 5 blocks of 20 launches, CUDA events)."""
import numpy as np
import cupy as cp

from dpcore import _C
from dpcore.dtypes import DTYPES, OPS


def median_ms(fn, iters=20, blocks=5):
    fn()
    times = []
    for _ in range(blocks):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / iters)
    return float(np.median(times))


print(f"{'dtype':>8} {'MiB':>6} {'dpcore GB/s':>12} {'cupy GB/s':>10} {'ratio':>6}")
for dtype in (np.float32, np.float16, np.int32):
    for mib in (1, 64, 1024):
        count = (mib << 20) // np.dtype(dtype).itemsize
        a, b, c = (cp.ones(count, dtype) for _ in range(3))
        stream = cp.cuda.get_current_stream().ptr
        ours = median_ms(lambda: _C.cuda_reduce(DTYPES[np.dtype(dtype)], OPS["sum"], a.data.ptr,
                                                b.data.ptr, c.data.ptr, count, 0, stream))
        theirs = median_ms(lambda: cp.add(a, b, out=c))
        moved = 3 * count * np.dtype(dtype).itemsize / 1e9  # read a, read b, write c
        print(f"{np.dtype(dtype).name:>8} {mib:>6} {moved / ours * 1e3:12.0f} "
              f"{moved / theirs * 1e3:10.0f} {theirs / ours:6.2f}")
