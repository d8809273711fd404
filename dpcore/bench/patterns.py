"""The bench's inputs and the results it expects, computed locally.

Inputs are integers chosen so that every result is exact in the dtype (sums stay within the
dtype's exact-integer range, products are powers of two that cannot overflow), so `#wrong` counts
elements whose bits differ, with no tolerance. A value depends on the element's global index
(period _PERIOD, a prime, so a chunk moved to the wrong place shows) and on the rank.
"""
import math

import numpy as np

_PERIOD = 4099

# Largest magnitude up to which every integer is exact in the dtype (ints: their range).
_EXACT = {"float16": 2 ** 11, "bfloat16": 2 ** 8, "float32": 2 ** 24, "float64": 2 ** 53,
          "int8": 127, "uint8": 255, "int32": 2 ** 31 - 1, "uint32": 2 ** 32 - 1,
          "int64": 2 ** 62, "uint64": 2 ** 63}
# How many factors of 2 a product may hold without overflow.
_MAX_TWOS = {"float16": 15, "bfloat16": 127, "float32": 127, "float64": 1023,
             "int8": 6, "uint8": 7, "int32": 30, "uint32": 31, "int64": 62, "uint64": 63}
_VALUE_CAP = 2 ** 40  # keeps int64/float64 patterns and their sums easy to reason about


class Case:
    """One row of the table: what every hook needs to know."""

    def __init__(self, dtype, op, root, algo, n, rank, count, sizes):
        self.dtype, self.op, self.root, self.algo = dtype, op, root, algo
        self.n, self.rank, self.count = n, rank, count
        self.send_count, self.recv_count, self.count_column = sizes
        self.dtype_name = dtype_name(dtype)


def dtype_name(dtype):
    return np.dtype(dtype).name  # "bfloat16" for ml_dtypes' too


def rank_values(case, rank):
    """The values of `rank` over one period of global indices, as float64 or int64."""
    name, n = case.dtype_name, case.n
    j = np.arange(_PERIOD, dtype=np.uint64)
    if case.op == "prod":  # mostly 1, a 2 where few enough ranks put one
        every = max(3, math.ceil(n / _MAX_TWOS[name]))
        return np.where((j + np.uint64(rank)) % np.uint64(every) == 0, 2, 1).astype(np.int64)
    hi = min(_EXACT[name], _VALUE_CAP)
    if case.op in ("sum", "avg"):
        hi //= n  # the sum over n ranks stays exact
    lo = 0 if case.dtype.kind == "u" or case.op in ("sum", "avg") else -hi
    span = np.uint64(max(hi - lo + 1, 1))
    mixed = (j * np.uint64(2654435761) + np.uint64(rank * 40503 + 12345)) % span
    return mixed.astype(np.int64) + lo


def tile(table, dtype, start, stop):
    """table[i % _PERIOD] for global indices i in [start, stop), in dtype."""
    shifted = np.roll(table, -(start % _PERIOD)).astype(dtype)
    return np.resize(shifted, max(stop - start, 0))


def reduced_values(case):
    """Every rank's values over one period, reduced by case.op as the collective must."""
    tables = [rank_values(case, r) for r in range(case.n)]
    floating = case.dtype_name.startswith(("float", "bfloat"))
    tables = [t.astype(np.float64 if floating else np.int64) for t in tables]
    if case.op == "max":
        return np.maximum.reduce(tables)
    if case.op == "min":
        return np.minimum.reduce(tables)
    if case.op == "prod":
        return np.multiply.reduce(tables)
    total = np.add.reduce(tables)
    if case.op == "avg":  # as dpcore computes it: the exact sum divided in the arithmetic type
        arith = np.float64 if case.dtype_name == "float64" else np.float32
        return total.astype(arith) / arith(case.n)
    return total


def fill_shard_of(case, rank, out, start):
    """out[:] = rank's input at global indices [start, start + out.size)."""
    out[...] = tile(rank_values(case, rank), case.dtype, start, start + out.size)
