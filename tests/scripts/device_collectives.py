"""Collectives on CUDA arrays, run by the device transport (csrc/cuda/): on the CPU emulation with
DPCORE_CUDA_EMULATION=1 (CI), or on a GPU with DEVICE=cupy (tests/gpu/device_check.sh), the same
checks. Against NumPy exactly, and bit for bit against the host path running the same algorithm on
the same inputs, floats too (one_shot rounds once, the ring after every hop, on both sides): every
dtype x op x algorithm (uint32 and uint64 at 2 ranks) over empty, tiny, odd and several-segment
counts; in place and into out=; async; reduce to the roots in turn; broadcast from every root;
all_gather of uneven shards.

Usage: mpiexec -n K python -m mpi4py device_collectives.py [all|few|two] [small]
  few: a sample of dtype x op pairs; two: float16 sum and float64 max alone (for tiny ring
  slots, where every pair takes thousands of rounds and the slots' order is what is tested);
  small: counts up to 1009 only
  trace: only print the verbs one ring all_reduce ran ('rank R: verbs [...]')
"""
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import dpcore
from checks import BFLOAT16, WIDE_UNSIGNED, Checker, make_input, ops_for, reference, say

few, two, small = "few" in sys.argv[1:], "two" in sys.argv[1:], "small" in sys.argv[1:]
if os.environ.get("DEVICE") == "cupy":
    import cupy as xp

    xp.cuda.Device(int(os.environ.get("LOCAL_RANK", MPI.COMM_WORLD.rank)) %
                   xp.cuda.runtime.getDeviceCount()).use()
    to_host = xp.asnumpy
else:
    from dpcore import emulated as xp

    to_host = lambda d: d.get()  # noqa: E731

DTYPES = [np.dtype(t) for t in ("float16", "float32", "float64", "int8", "uint8", "int32",
                                 "int64")]
FEW = [(np.dtype("float16"), "sum"), (np.dtype("float16"), "avg"), (np.dtype("float32"), "prod"),
       (np.dtype("float64"), "max"), (np.dtype("int8"), "sum"), (np.dtype("int64"), "min")]
if os.environ.get("DEVICE") != "cupy" and BFLOAT16 is not None:  # CuPy has no bfloat16
    DTYPES.append(BFLOAT16)
    FEW += [(BFLOAT16, "sum"), (BFLOAT16, "avg")]
# for tiny slots: the narrowest and the widest element, 32 and 8 of them to a 64-byte slot
TWO = [(np.dtype("float16"), "sum"), (np.dtype("float64"), "max")]
CASES = TWO if two else FEW if few else [(d, op) for d in DTYPES for op in ops_for(d)]
if MPI.COMM_WORLD.size == 2 and not (few or two):
    CASES += [(d, op) for d in WIDE_UNSIGNED for op in ops_for(d)]

comm = dpcore.init()
rank, size = comm.rank, comm.size
SLOT_BYTES = int(os.environ.get("DPCORE_SLOT_BYTES", 64 << 10))
check = Checker(rank)

if "trace" in sys.argv[1:]:
    comm.all_reduce(xp.asarray(np.ones(1, np.float32)))  # makes the device backend
    backend = comm._device._backend
    backend.enable_trace(True)
    comm.all_reduce(xp.asarray(np.ones(3001, np.float32)), algo="ring")
    say(rank, "verbs " + json.dumps([e[0] for e in backend.take_trace() if e[4] >= 0]))
    comm.close()
    check.finish()
    sys.exit(0)


def counts_for(dtype):
    segment = SLOT_BYTES // dtype.itemsize  # a ring slot
    counts = [0, 1, 7, size + 1, 1009, 3 * size * segment + 5]
    return [c for c in counts if not small or c <= 1009]


def algos(nbytes):
    return ["auto", "ring"] + (["one_shot"] if nbytes <= comm.one_shot_bytes else [])


for dtype, op in CASES:
    for count in counts_for(dtype):
        everyone = [make_input(dtype, op, count, r, size) for r in range(size)]
        x = everyone[rank]
        want = reference(op, everyone)
        lo, hi = dpcore.shard_range(count, size, rank)
        for algo in algos(x.nbytes):
            label = f"{dtype} {op} count={count} {algo}"
            host_algo = algo if algo != "auto" else ("one_shot" if x.nbytes <= comm.one_shot_bytes
                                                     else "ring")
            same = comm.all_reduce(x, op=op, algo=host_algo)
            y = comm.all_reduce(xp.asarray(x), op=op, algo=algo)
            check.equal(to_host(y), want, f"all_reduce {label}")
            check.equal(to_host(y).view(np.uint8), same.view(np.uint8),
                        f"all_reduce {label}: the host path's bits")
            d = xp.asarray(x)
            comm.all_reduce(d, op=op, out=d, algo=algo)
            check.equal(to_host(d), want, f"all_reduce in place {label}")
            s = comm.reduce_scatter(xp.asarray(x), op=op, algo=algo)
            check.equal(to_host(s), want[lo:hi], f"reduce_scatter {label}")
            d = xp.asarray(x)
            comm.reduce_scatter(d, op=op, out=d[lo:hi], algo=algo)
            check.equal(to_host(d)[lo:hi], want[lo:hi], f"reduce_scatter in place {label}")
            g = comm.all_gather(s, algo=algo)
            check.equal(to_host(g), want, f"all_gather {label}")
            out = xp.asarray(np.zeros(count, dtype))
            comm.all_gather(xp.asarray(want[lo:hi]), out=out, algo=algo)
            check.equal(to_host(out), want, f"all_gather into out {label}")
            work = comm.all_reduce(xp.asarray(x), op=op, algo=algo, async_op=True)
            check.equal(to_host(work.wait()), want, f"async all_reduce {label}")
            root = count % size
            r = comm.reduce(xp.asarray(x), root=root, op=op, algo=algo)
            if rank == root:
                check.equal(to_host(r), want, f"reduce {label}")
                check.equal(to_host(r).view(np.uint8),
                            comm.reduce(x, root=root, op=op, algo=host_algo).view(np.uint8),
                            f"reduce {label}: the host path's bits")
                d = xp.asarray(x)
                check.true(comm.reduce(d, root=root, op=op, out=d, algo=algo) is d,
                           f"reduce in place returns out, {label}")
                check.equal(to_host(d), want, f"reduce in place {label}")
            else:
                check.true(r is None, f"reduce off the root, {label}")
                comm.reduce(x, root=root, op=op, algo=host_algo)
                d = xp.asarray(x)
                comm.reduce(d, root=root, op=op, algo=algo)
                check.equal(to_host(d), x, f"reduce leaves x alone off the root, {label}")
            work = comm.reduce(xp.asarray(x), root=root, op=op, algo=algo, async_op=True)
            got = work.wait()
            check.true((got is None) == (rank != root), f"async reduce's result, {label}")
            if got is not None:
                check.equal(to_host(got), want, f"async reduce {label}")

for dtype in sorted({d for d, _ in CASES}, key=str):  # the same order on every rank
    for root in range(size):
        for count in counts_for(dtype)[1::2]:
            for algo in algos(count * dtype.itemsize):
                b = xp.asarray(make_input(dtype, "sum", count, rank, size))
                comm.broadcast(b, root=root, algo=algo)
                check.equal(to_host(b), make_input(dtype, "sum", count, root, size),
                            f"broadcast {dtype} root={root} count={count} {algo}")
    shards = [make_input(dtype, "sum", 3 * r + 1, r, size) for r in range(size)]
    for algo in ("ring", "one_shot"):
        g = comm.all_gather(xp.asarray(shards[rank]), algo=algo)
        check.equal(to_host(g), np.concatenate(shards), f"all_gather uneven {dtype} {algo}")

calls = comm.algorithm_calls()
check.true(calls.get("ring", 0) > 0 and calls.get("one_shot", 0) > 0, f"algorithms ran: {calls}")
say(rank, f"device {comm.device}")
comm.close()
check.finish()
