"""Bad input on CUDA arrays (the CPU emulation: DPCORE_CUDA_EMULATION=1): each rank makes its own
mistakes in turn, gets a clear TypeError or ValueError at once, and the peers never see the call;
the communicator then still works (a call on a stream that is capturing a CUDA graph is
refused so too), and a call that differs between ranks is a CommError on all.

Usage: mpiexec -n 2 python -m mpi4py device_bad_input.py
"""
import re
import time

import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker
from dpcore import emulated
from dpcore.dtypes import ALGORITHMS, ALL_REDUCE, DTYPES, OPS

comm = dpcore.init(timeout=20)
rank, size = comm.rank, comm.size
check = Checker(rank)
x = emulated.asarray(np.arange(12, dtype=np.float32))


def refused(call, error, words, label):
    try:
        call()
    except error as e:
        check.true(words in str(e), f"{label}: {e}")
    else:
        check.true(False, f"{label}: no {error.__name__}")


def mistakes(r):
    """Rank r's bad calls: only it makes them."""
    if rank != r:
        return
    refused(lambda: comm.all_reduce(x, out=np.empty(12, np.float32)), TypeError,
            "on the device", "host out for a device x")
    refused(lambda: comm.all_reduce(x, algo="direct"), ValueError, "comm.alloc",
            "direct on an ordinary device buffer")
    refused(lambda: comm.all_reduce(x, out=emulated.empty(12, np.int32)), TypeError, "dtype",
            "out of another dtype")
    refused(lambda: comm.all_reduce(x, out=emulated.empty(11, np.float32)), ValueError, "shape",
            "out of another shape")
    z = emulated.asarray(np.arange(24, dtype=np.float32))
    refused(lambda: comm.all_reduce(z[:12], out=z[1:13]), ValueError, "overlaps",
            "out overlapping x")
    refused(lambda: comm.all_reduce(x.reshape(3, 4)[:, :2]), ValueError, "C-contiguous",
            "a strided x")
    refused(lambda: comm.all_reduce(emulated.asarray(np.arange(3)), op="avg"), TypeError,
            "floating", "avg of integers")
    refused(lambda: comm.broadcast(x, root=size), ValueError, "root", "a root out of range")
    refused(lambda: comm.scatter([x] * size, emulated.empty(12, np.float32), root=r), TypeError,
            "pass one array", "scatter from a list of device arrays")
    big = emulated.empty(comm.one_shot_bytes // 4 + 1, np.float32)
    refused(lambda: comm.all_reduce(big, algo="one_shot"), ValueError, "at most",
            "one_shot past its slot")
    with emulated.capturing():
        refused(lambda: comm.all_reduce(x), ValueError, "capturing a CUDA graph",
                "a call on a stream that captures a graph")


for r in range(size):
    mistakes(r)
    y = comm.all_reduce(x)  # still works, and every rank made the same calls
    check.equal(y.get(), np.arange(12, dtype=np.float32) * size, f"after rank {r}'s mistakes")


def sides_differ(first_device_call):
    """Rank 0 passes CUDA arrays where rank 1 passes host arrays, in the same call of one
    communicator (its first on CUDA arrays, or a later one): a CommError on both within
    seconds, under the one number both ranks give the call."""
    other = dpcore.init(timeout=20)
    made = 1
    if not first_device_call:
        other.all_reduce(x)
        made += 1
    other.all_reduce(np.ones(3, np.float32))
    made += 1
    start = time.monotonic()
    try:
        other.all_reduce(x if rank == 0 else np.ones(12, np.float32))
        check.true(False, "arrays on different sides did not raise")
    except dpcore.CommError as e:
        took = time.monotonic() - start
        check.true(took < 5, f"sides: the error took {took:.1f} s")
        check.true(f"all_reduce #{made} " in str(e) and "CUDA arrays" in str(e)
                   and "host arrays" in str(e), f"sides: {e}")
    other.close()


sides_differ(first_device_call=False)
sides_differ(first_device_call=True)

# Straight to the backend, past dpcore/comm/'s checks, on rank 0 alone: the transport's own
# refusal takes no number from the communicator's count either.
if rank == 0:
    ptr = x.__cuda_array_interface__["data"][0]
    refused(lambda: comm._device._backend.run_device(
        ALL_REDUCE, DTYPES[x.dtype], OPS["sum"], 0, ALGORITHMS["direct"], ptr, ptr, x.size,
        x.size, 0), ValueError, "comm.alloc", "direct past the Python checks")

# A call that differs between ranks: every rank hears it, under one number (the mistakes made
# above, refused on one rank alone, took none).
try:
    comm.all_reduce(emulated.asarray(np.ones(5 + rank, np.float32)))
    check.true(False, "a mismatched call did not raise")
except dpcore.CommError as e:
    check.true("mismatch" in str(e) and "all_reduce" in str(e), f"mismatch message: {e}")
    numbers = MPI.COMM_WORLD.allgather(re.match(r"dpcore all_reduce #(\d+)", str(e)).group(1))
    check.true(len(set(numbers)) == 1, f"the ranks number the call {numbers}")
check.finish()
