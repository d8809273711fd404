"""Measuring alpha, beta and gamma: time real collectives, then least squares.

Every sample's model time is overhead + alpha*steps + beta*bytes + gamma*reduced with steps,
bytes and reduced taken from formulas.py, so the fit is linear. all_gather reduces nothing,
which separates gamma from beta; its n-1 ring steps against all_reduce's 2(n-1) separate alpha
from the fixed per-call overhead (a Python call and a header handshake that every collective
pays once, like the base latency in NCCL's tuner). The fit minimises relative error (rows
weighted by 1/time): time spans four orders of magnitude, and an absolute fit would ignore the
small, latency-bound sizes.
"""
import itertools
import statistics
import time
from collections import namedtuple

import numpy as np

from .formulas import cost
from .params import Params

Sample = namedtuple("Sample", "coll algo n nbytes seconds")


def fit_line(nbytes, seconds):
    """(intercept, slope) of seconds = intercept + slope * nbytes, relative least squares.
    For one collective and algorithm, intercept = steps * alpha and slope = beta per byte of S
    times the formula's factor (e.g. ring all_gather: (n-1) alpha and (n-1)/n beta)."""
    x, t = np.asarray(nbytes, float), np.asarray(seconds, float)
    a = np.stack([np.ones_like(x), x], axis=1) / t[:, None]
    (intercept, slope), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return float(intercept), float(slope)


def fit(samples, local_size=None):
    """Params (overhead, alpha, beta, gamma, all >= 0) that best explain the samples (Sample
    tuples or (coll, algo, n, nbytes, seconds)). A term the samples cannot tell apart from
    another is left at 0: gamma when only all_reduce was measured (beta then absorbs the
    reduction), the per-call overhead when every sample has the same number of steps (alpha
    absorbs it)."""
    rows, t = [], []
    for coll, algo, n, nbytes, seconds in samples:
        c = cost(coll, algo, nbytes, n, local_size=local_size)
        rows.append((c.steps, c.nbytes, c.reduced, 1.0))
        t.append(seconds)
    a, t = np.asarray(rows, float), np.asarray(t, float)
    a, b = a / t[:, None], np.ones_like(t)
    cols = []
    for j in range(4):  # in this order of preference: alpha, beta, gamma, overhead
        trial = cols + [j]
        if np.linalg.matrix_rank(a[:, trial] / abs(a[:, trial]).max(axis=0).clip(1e-300),
                                 tol=1e-9) == len(trial):
            cols = trial
    x = _nonnegative_lstsq(a, b, cols)
    return Params(alpha=x[0], beta=x[1], gamma=x[2], overhead=x[3])


def _nonnegative_lstsq(a, b, cols):
    """Least squares with x >= 0 by trying every subset of the (at most four) columns: the
    best feasible subset is the answer, and with four unknowns that is fifteen solves."""
    best, best_res = np.zeros(a.shape[1]), np.inf
    for k in range(len(cols), 0, -1):
        for subset in itertools.combinations(cols, k):
            x_sub, *_ = np.linalg.lstsq(a[:, subset], b, rcond=None)
            if (x_sub < 0).any():
                continue
            res = float(np.sum((a[:, subset] @ x_sub - b) ** 2))
            if res < best_res * (1 - 1e-9):
                best, best_res = np.zeros(a.shape[1]), res
                best[list(subset)] = x_sub
    return [float(v) for v in best]


def fit_per_algorithm(samples):
    """{algo: Params}: each algorithm has its own alpha and beta (one_shot's beta is memory
    traffic through the shared slots, the ring's is per byte forwarded along the ring)."""
    by_algo = {}
    for s in samples:
        by_algo.setdefault(s[1], []).append(s)
    return {algo: fit(group) for algo, group in by_algo.items()}


# -- the sweep (needs mpiexec) ----------------------------------------------------------------

def sizes_for(algo, n, quick=False, one_shot_max=256 << 10):
    """Bytes S to measure: one_shot up to its slot, the others from latency-bound to past the
    last-level cache (64 MiB), where the bench's default sweep ends."""
    step = 4 if quick else 2
    if algo == "one_shot":
        return [1 << k for k in range(8, 19, step) if (1 << k) <= one_shot_max]
    return [1 << k for k in range(10, 23 if quick else 27, step)]


def _call(comm, coll, algo, nbytes):
    """A ready-to-time collective of nbytes (float32, in place, as the bench's model_err% column
    compares with) and its true size."""
    from ..sharding import shard_range

    count = max(1, nbytes // 4)
    x = np.ones(count, np.float32)
    if coll == "all_reduce":
        return (lambda: comm.all_reduce(x, out=x, algo=algo)), count * 4
    start, stop = shard_range(count, comm.size, comm.rank)
    shard = x[start:stop]
    return (lambda: comm.all_gather(shard, out=x, algo=algo)), count * 4


def algorithms(comm):
    """What the sweep measures: every algorithm the communicator runs by name, and direct
    where the ranks may read each other's memory (comm.direct)."""
    return tuple(comm.algorithms) + (("direct",) if getattr(comm, "direct", False) else ())


def sweep(comm, quick=False):
    """Samples for all_reduce and all_gather, in place, under every algorithm dpcore runs
    (algorithms()): the median over repeats (11, fewer if the sweep passes 15 s) of a timed
    loop, taken by the slowest rank (a collective ends with its last rank).
    Repeats go round-robin over all sizes, so a burst of noise from another process spoils one
    repeat of many sizes (which the median drops) instead of every repeat of one size."""
    from .. import comm as comm_module

    limit = getattr(comm_module, "_ONE_SHOT_BYTES", 256 << 10)  # one_shot's slot, per rank
    configs = []
    for algo in algorithms(comm):
        for coll in ("all_reduce", "all_gather"):
            for nbytes in sizes_for(algo, comm.size, quick, limit):
                call, actual = _call(comm, coll, algo, nbytes)
                call(), call()  # warm up: page faults, first touch of the shared slots
                # back-to-back calls, as the bench times them: a lone call after a barrier
                # also pays for the ranks leaving the barrier apart (measured: 1 MiB 40 % slower)
                iters = max(5, min(50, (16 << 20) // actual))
                configs.append((coll, algo, actual, call, iters, []))
    start = time.perf_counter()
    for repeat in range(5 if quick else 11):
        for coll, algo, actual, call, iters, times in configs:
            comm.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            times.append((time.perf_counter() - t0) / iters)
        # a busy machine makes everything slow: keep to the time budget once 3 repeats are in
        late = time.perf_counter() - start > (5 if quick else 15)
        if repeat >= 2 and comm._mpi.bcast(late, root=0):
            break
    per_rank = comm._mpi.allgather([statistics.median(c[5]) for c in configs])
    return [Sample(coll, algo, comm.size, actual, max(t))
            for (coll, algo, actual, *_), t in zip(configs, zip(*per_rank))]
