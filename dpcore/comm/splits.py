"""all_to_all's splits: each rank's send and receive counts, checked where they were passed, then
exchanged in one small all_gather (2n int64 a rank) before the call, so that every rank holds the
same n x n matrix (csrc/include/dpcore/task.h: Task::splits) and checks it alike: splits that
disagree between ranks raise the same CommError on every rank, before any data moves."""
import numbers

import numpy as np

from .. import _C

UNKNOWN = -1  # out_splits=None: what a rank receives is learned from the senders' splits


def row(splits, out_splits, count, size):
    """This rank's 2n int64: its send splits (None: count / size each, ValueError unless whole),
    then its receive splits (None: UNKNOWN)."""
    sends = even(count, size) if splits is None else counts(splits, size, "splits")
    if splits is not None and sum(sends) != count:
        raise ValueError(f"dpcore: all_to_all's splits add up to {sum(sends)} elements, but x "
                         f"has {count}")
    takes = [UNKNOWN] * size if out_splits is None else counts(out_splits, size, "out_splits")
    return np.array(sends + takes, np.int64)


def even(count, size):
    if count % size:
        raise ValueError(f"dpcore: all_to_all without splits sends x.size / {size} elements to "
                         f"each rank, but x has {count}; pass splits")
    return [count // size] * size


def counts(values, size, what):
    values = list(values)
    if len(values) != size or not all(isinstance(v, numbers.Integral) and v >= 0
                                      for v in values):
        raise ValueError(f"dpcore: all_to_all's {what} must be {size} counts >= 0 (one per "
                         f"rank), not {values!r}")
    return [int(v) for v in values]


def matrix(rows, size):
    """The n x n uint64 matrix (splits[p * n + q]: elements rank p sends rank q) from every
    rank's row; CommError, the same on every rank, where a rank expects other counts than its
    senders send."""
    rows = np.asarray(rows, np.int64).reshape(size, 2 * size)
    sends, takes = rows[:, :size], rows[:, size:]
    wrong = [f"rank {p} sends rank {q} {sends[p, q]} elements but rank {q} expects "
             f"{takes[q, p]}" for q in range(size) for p in range(size)
             if takes[q, p] != UNKNOWN and takes[q, p] != sends[p, q]]
    if wrong:
        raise _C.CommError("dpcore all_to_all: the ranks' splits disagree: " + "; ".join(wrong)
                           + " (nothing was sent; the communicator stays usable)")
    return np.ascontiguousarray(sends, np.uint64)
