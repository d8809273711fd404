"""Shared by the test scripts: exact test data, reference results, and a checker that collects
every mismatch (so one run shows the whole pattern of a bug) and fails the job at the end.

Test data follows gloo: element i of rank r starts from a value unique to (i, r), kept small so
that sums, products, max and min are exact in every dtype, including float16 and bfloat16.
"""
import os
import sys

import numpy as np
from mpi4py import MPI

_DTYPES = [np.dtype(t) for t in ("float16", "float32", "float64", "int8", "uint8", "int32",
                                 "int64")]

# A sample for the transports whose every call is slow here (MPI with ranks sharing cores):
# each dtype's arithmetic (16-bit floats, wrapping integers) and each op at least once.
_F16, _F32, _I64 = (np.dtype(t) for t in ("float16", "float32", "int64"))
_FEW_REDUCTIONS = [(_F16, "sum"), (_F16, "avg"), (_F16, "max"), (_F32, "sum"), (_F32, "prod"),
                   (_F32, "avg"), (np.dtype("float64"), "min"), (np.dtype("int8"), "sum"),
                   (np.dtype("int32"), "prod"), (_I64, "max")]
_FEW_DTYPES = [_F16, _F32, _I64]
# The unsigned dtypes nccl-tests has beside uint8, checked at 2 ranks only (reductions.py,
# device_collectives.py): their loops are the signed ones' with another type, and each case
# costs as much as int32's.
WIDE_UNSIGNED = [np.dtype("uint32"), np.dtype("uint64")]


def __getattr__(name):
    """DTYPES, FEW_DTYPES, FEW_REDUCTIONS, and BFLOAT16 (None without ml_dtypes), which have
    bfloat16 where ml_dtypes is installed; made on first use, as dpcore looks bfloat16 up: its
    import takes about a second, which every rank of the scripts that need none of them paid."""
    if name not in ("BFLOAT16", "DTYPES", "FEW_DTYPES", "FEW_REDUCTIONS"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        import ml_dtypes

        bfloat16 = np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        bfloat16 = None
    extra = [] if bfloat16 is None else [bfloat16]
    made = {"BFLOAT16": bfloat16, "DTYPES": _DTYPES + extra, "FEW_DTYPES": _FEW_DTYPES + extra,
            "FEW_REDUCTIONS": _FEW_REDUCTIONS + [(d, "sum") for d in extra]}
    globals().update(made)
    return made[name]


# What MPI itself can reduce (mpi4py knows neither float16 nor bfloat16 as MPI types).
MPI_DTYPES = {np.dtype(t) for t in ("float32", "float64", "int8", "uint8", "int32", "int64",
                                    "uint32", "uint64")}
MPI_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}

# Distinct values per dtype: sums of 4 ranks stay exact (bfloat16 holds integers up to 256,
# float16 up to 2048); int8/uint8 sums wrap, as NumPy's do, and so do uint32/uint64's (their
# values count down from the top).
_MODULUS = {"float16": 1024, "bfloat16": 128, "int8": 256, "uint8": 256, "float32": 1 << 20,
            "int32": 1 << 20, "float64": 1 << 40, "int64": 1 << 40, "uint32": 1 << 20,
            "uint64": 1 << 40}


def is_float(dtype):
    return dtype.kind == "f" or dtype.name == "bfloat16"


def ops_for(dtype):
    return ["sum", "prod", "max", "min"] + (["avg"] if is_float(dtype) else [])


def make_input(dtype, op, count, rank, size, shape=None):
    """Rank `rank`'s input: element i comes from the unique key i * size + rank, scrambled (37 is
    odd, so coprime to the moduli) so that max and min come from every rank in turn."""
    m = _MODULUS[str(dtype)]
    key = (np.arange(count, dtype=np.int64) * size + rank) * 37 % m
    if op == "prod":  # factors 1..4, some negative: products of 4 ranks stay <= 256
        v = key % 4 + 1
        if dtype.kind != "u":
            v = np.where(key % 3 == 0, -v, v)
    elif dtype.kind == "u" and dtype.itemsize >= 4:  # from the top down, so sums wrap around
        return (np.iinfo(dtype).max - key.astype(dtype)).reshape(shape or -1)
    elif dtype.kind == "u":
        v = key
    else:
        v = key - m // 2
    x = v.astype(dtype)
    return x.reshape(shape) if shape is not None else x


def reference(op, inputs):
    """The exact elementwise reduction of all ranks' inputs, as NumPy computes it."""
    dtype = inputs[0].dtype
    stack = np.stack(inputs)
    if is_float(dtype):  # exact in float64, then one rounding (only avg rounds at all)
        s = stack.astype(np.float64)
        ufunc = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum,
                 "min": np.minimum}[op]
        r = ufunc.reduce(s, axis=0)
        if op == "avg":
            r = r / len(inputs)
        return r.astype(dtype)
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    return ufunc.reduce(stack, axis=0, dtype=dtype)  # integers wrap, as in C


def shard_sizes(total, size):
    """(name, every rank's shard length) of uneven shards to gather: shard_range's split of
    `total`, and some less regular ones, empty shards among them."""
    from dpcore import shard_range

    yield "shard_range", [stop - start for start, stop in
                          (shard_range(total, size, r) for r in range(size))]
    yield "rank+1", [r + 1 for r in range(size)]
    yield "only last rank", [0] * (size - 1) + [total]
    yield "alternating empty", [0 if r % 2 else total // size + r for r in range(size)]


def capped(counts):
    """The counts up to the script's first argument (a count; "all" or none: every count)."""
    most = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "all" else None
    return [c for c in counts if most is None or c <= most]


def device_arrays():
    """(xp, to_host) for the device scripts: CuPy on this rank's GPU with DEVICE=cupy (a GPU
    run), else dpcore.emulated (DPCORE_CUDA_EMULATION=1); to_host gives a NumPy copy."""
    if os.environ.get("DEVICE") == "cupy":
        import cupy

        cupy.cuda.Device(MPI.COMM_WORLD.rank % cupy.cuda.runtime.getDeviceCount()).use()
        return cupy, cupy.asnumpy
    from dpcore import emulated

    return emulated, lambda d: d.get()


def mpi_allreduce(mpi_comm, x, op):
    """MPI's own Allreduce of x, or None where MPI cannot reduce that dtype or op."""
    if x.dtype not in MPI_DTYPES or op not in MPI_OPS:
        return None
    out = np.empty_like(x)
    mpi_comm.Allreduce(x, out, op=MPI_OPS[op])
    return out


def mpi_allgatherv(mpi_comm, shard):
    """MPI's own Allgatherv of 1-D shards of any dtype (moved as bytes)."""
    counts = mpi_comm.allgather(shard.size)
    out = np.empty(sum(counts), shard.dtype)
    nbytes = [c * shard.dtype.itemsize for c in counts]
    mpi_comm.Allgatherv(shard.view(np.uint8), [out.view(np.uint8), nbytes])
    return out


def mpi_bcast(mpi_comm, x, root):
    """MPI's own Bcast of a copy of x (any dtype, moved as bytes)."""
    y = np.ascontiguousarray(x).copy()
    mpi_comm.Bcast(y.reshape(-1).view(np.uint8), root=root)
    return y


def expect_transport(comm, check):
    """The transport and all_reduce path the launching test expects (EXPECT_TRANSPORT and
    EXPECT_PATH, from tests/transport_configs.py), so that a configuration never passes by
    running somewhere else: a hierarchical all_reduce takes two steps on the node's shared
    memory, a flat one none."""
    transport, path = os.environ.get("EXPECT_TRANSPORT"), os.environ.get("EXPECT_PATH")
    if transport is not None:
        check.true(comm.transport == transport,
                   f"transport {comm.transport!r}, expected {transport!r}")
    if path is not None:
        hierarchical = getattr(comm._backend, "hierarchical", False)
        check.true(hierarchical == (path == "hierarchical"),
                   f"all_reduce path {'hierarchical' if hierarchical else 'flat'}, expected {path}")
        if hierarchical:
            before = comm._backend.node_sequence
            comm.all_reduce(np.ones(1009, np.float32))
            check.true(comm._backend.node_sequence == before + 2,
                       "a hierarchical all_reduce did not go through the node's shared memory")


class Checker:
    """Collects exact comparisons; finish() reports them all and fails the job if any failed."""

    def __init__(self, rank):
        self.rank = rank
        self.checks = 0
        self.failures = []

    def equal(self, got, want, label):
        """got must have want's dtype and shape and the same bits in every element."""
        self.checks += 1
        problem = _difference(got, want)
        if problem:
            self.failures.append(f"{label}: {problem}")
        return not problem

    def true(self, condition, label):
        self.checks += 1
        if not condition:
            self.failures.append(label)
        return bool(condition)

    def finish(self, mpi_comm=MPI.COMM_WORLD):
        for f in self.failures[:40]:
            say(self.rank, f"FAIL {f}")
        if len(self.failures) > 40:
            say(self.rank, f"... and {len(self.failures) - 40} more failures")
        if mpi_comm.allreduce(len(self.failures)):
            sys.exit(1)
        say(self.rank, f"ok ({self.checks} checks)")


def say(rank, message):
    """Print 'rank R: message' in one write, so lines of different ranks never interleave."""
    sys.stdout.write(f"rank {rank}: {message}\n")
    sys.stdout.flush()


def _difference(got, want):
    got_type = type(got).__name__
    if not isinstance(got, np.ndarray):
        return f"expected a numpy.ndarray, got {got_type}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    bits = np.dtype(f"u{want.dtype.itemsize}")
    wrong = np.flatnonzero(got.reshape(-1).view(bits) != want.reshape(-1).view(bits))
    if wrong.size:
        i = wrong[0]
        return (f"{wrong.size} of {want.size} elements wrong; first at flat index {i}: got "
                f"{got.reshape(-1)[i]!r}, expected {want.reshape(-1)[i]!r}")
    return None
