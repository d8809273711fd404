"""Measuring alpha, beta and gamma: time real collectives, then least squares.

Every sample's model time is overhead + alpha*steps + beta*bytes + gamma*reduced with steps,
bytes and reduced taken from formulas.py, so the fit is linear. all_gather reduces nothing,
which separates gamma from beta; its n-1 ring steps against all_reduce's 2(n-1) separate alpha
from the fixed per-call overhead (a Python call and a header handshake that every collective
pays once, like the base latency in NCCL's tuner). The fit minimises relative error (rows
weighted by 1/time): time spans four orders of magnitude, and an absolute fit would ignore the
small, latency-bound sizes.

The cache: for a candidate cache size C a buffer's bytes split into the share that hits it
(beta) and the share S/(S+C) that misses (beta_mem, params.spill), which keeps the fit linear;
the fit tries C = 1 MiB .. 64 MiB and keeps the best, if it explains the samples clearly better
(a fifth less squared error) than one beta for every size.
"""
import itertools
import statistics
import time
from collections import namedtuple

import numpy as np

from .formulas import cost
from .params import Params, spill

Sample = namedtuple("Sample", "coll algo n nbytes seconds")


def fit_line(nbytes, seconds):
    """(intercept, slope) of seconds = intercept + slope * nbytes, relative least squares.
    For one collective and algorithm, intercept = steps * alpha and slope = beta per byte of S
    times the formula's factor (e.g. ring all_gather: (n-1) alpha and (n-1)/n beta)."""
    x, t = np.asarray(nbytes, float), np.asarray(seconds, float)
    a = np.stack([np.ones_like(x), x], axis=1) / t[:, None]
    (intercept, slope), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return float(intercept), float(slope)


_CACHE_CANDIDATES = [1 << k for k in range(20, 27)]  # 1 MiB .. 64 MiB
_CACHE_GAIN = 0.8  # a cache must cut the squared relative error to this share of one beta's
_EXACT = 1e-18     # per sample: squared relative error that is only rounding (a perfect fit)


def fit(samples, local_size=None):
    """Params (overhead, alpha, beta, gamma, all >= 0; and cache_bytes, beta_mem where the
    samples show a cache) that best explain the samples (Sample tuples or (coll, algo, n,
    nbytes, seconds)). A term the samples cannot tell apart from another is left at 0: gamma
    when only all_reduce was measured (beta then absorbs the reduction), the per-call overhead
    when every sample has the same number of steps (alpha absorbs it)."""
    costs, sizes, t = [], [], []
    for coll, algo, n, nbytes, seconds in samples:
        costs.append(cost(coll, algo, nbytes, n, local_size=local_size))
        sizes.append(nbytes)
        t.append(seconds)
    t = np.asarray(t, float)
    x, res = _fit_columns(costs, sizes, t, None)
    best = Params(alpha=x[0], beta=x[1], gamma=x[2], overhead=x[3])
    flat_res = res
    # where one beta explains every size exactly there is no bend to find
    candidates = _CACHE_CANDIDATES if flat_res > _EXACT * len(t) else []
    for c in candidates:
        if sum(size > c for size in sizes) < 2:  # a bend needs two sizes past it
            continue
        x, r = _fit_columns(costs, sizes, t, c)
        if r < res and r < _CACHE_GAIN * flat_res and x[4] > 0:
            best, res = Params(alpha=x[0], beta=x[1], gamma=x[2], overhead=x[3],
                               cache_bytes=float(c), beta_mem=x[4]), r
    return best


def _fit_columns(costs, sizes, t, cache):
    """([alpha, beta, gamma, overhead, beta_mem], squared relative error) for one candidate
    cache size (None: no cache term)."""
    rows = []
    for k, size in zip(costs, sizes):
        s = spill(size, cache)
        rows.append((k.steps, k.nbytes * (1 - s), k.reduced, 1.0, k.nbytes * s))
    a, b = np.asarray(rows, float) / t[:, None], np.ones_like(t)
    cols = []
    # by preference: alpha, beta, then beta_mem before gamma, which all_reduce alone cannot
    # tell from the two betas (its reduced bytes are a fixed share of its bytes moved)
    for j in (0, 1, 4, 2, 3) if cache is not None else (0, 1, 2, 3):
        trial = cols + [j]
        if np.linalg.matrix_rank(a[:, trial] / abs(a[:, trial]).max(axis=0).clip(1e-300),
                                 tol=1e-9) == len(trial):
            cols = trial
    x = _nonnegative_lstsq(a, b, cols)
    return x, float(np.sum((a @ np.asarray(x) - b) ** 2))


def _nonnegative_lstsq(a, b, cols):
    """Least squares with x >= 0 by trying every subset of the (at most five) columns: the
    best feasible subset is the answer, and with five unknowns that is 31 solves."""
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
    """{algo: Params} and {"algo/coll": Params}: each algorithm has its own alpha and beta
    (one_shot's beta is memory traffic through the shared slots, the ring's is per byte
    forwarded along the ring).

    "algo" is fitted on every collective measured with it, which is what tells gamma from beta
    and alpha from the overhead: the numbers to teach with. "algo/coll" is fitted on that
    collective alone, and predicts it (params_for): the collectives do not meet memory alike.
    Direct all_gather reads a peer's shard that nobody rewrites; direct all_reduce reads an
    input the peer has just overwritten, still dirty in the peer's cache. With the two cores on
    different dies, that made direct all_reduce faster per byte past the cache, not slower, and
    the joint fit predicted its 256 MiB 67 % high; fitted alone, within 12 %."""
    groups = {}
    for s in samples:
        groups.setdefault(s[1], []).append(s)
        groups.setdefault(f"{s[1]}/{s[0]}", []).append(s)
    return {key: fit(group) for key, group in groups.items()}


# -- the sweep (needs mpiexec) ----------------------------------------------------------------

def sizes_for(algo, n, quick=False, one_shot_max=256 << 10):
    """Bytes S to measure: one_shot up to its slot; the others from latency-bound to well past
    the last-level cache (256 MiB, as far as benchmarks/mpi_table.py goes), by factors of 2 so
    that the fit can place the cache's bend."""
    if algo == "one_shot":
        return [1 << k for k in range(8, 19, 4 if quick else 2) if (1 << k) <= one_shot_max]
    return [1 << k for k in (range(10, 23, 4) if quick else range(10, 29))]


def _call(buffer, comm, coll, algo, nbytes):
    """A ready-to-time collective of nbytes (float32, in place, as the bench's model_err% column
    compares with) on the front of `buffer`, and its true size."""
    from ..sharding import shard_range

    count = max(1, nbytes // 4)
    x = buffer[:count]
    if coll == "all_reduce":
        return (lambda: comm.all_reduce(x, out=x, algo=algo)), count * 4
    start, stop = shard_range(count, comm.size, comm.rank)
    shard = x[start:stop]
    return (lambda: comm.all_gather(shard, out=x, algo=algo)), count * 4


def algorithms(comm):
    """What the sweep measures: every algorithm the communicator runs by name, and direct
    where the ranks may read each other's memory (comm.direct)."""
    return tuple(comm.algorithms) + (("direct",) if getattr(comm, "direct", False) else ())


def sweep(comm, quick=False, on_round=None):
    """Samples for all_reduce and all_gather, in place, under every algorithm dpcore runs
    (algorithms()): the median over repeats (11, fewer if the sweep passes 30 s) of a timed
    loop, taken by the slowest rank (a collective ends with its last rank).
    Repeats go round-robin over all sizes, so a burst of noise from another process spoils one
    repeat of many sizes (which the median drops) instead of every repeat of one size.
    on_round(k, rounds): called on every rank after round k of (now) `rounds`."""
    limit = comm.one_shot_bytes  # one_shot's slot, per rank
    sizes = {algo: sizes_for(algo, comm.size, quick, limit) for algo in algorithms(comm)}
    buffer = np.ones(max(max(s) for s in sizes.values()) // 4, np.float32)  # one for all
    configs = []
    for algo in algorithms(comm):
        for coll in ("all_reduce", "all_gather"):
            for nbytes in sizes[algo]:
                call, actual = _call(buffer, comm, coll, algo, nbytes)
                call(), call()  # warm up: page faults, first touch of the shared slots
                # back-to-back calls, as the bench times them: a lone call after a barrier
                # also pays for the ranks leaving the barrier apart
                iters = max(3, min(50, (16 << 20) // actual))
                configs.append((coll, algo, actual, call, iters, []))
    start = time.perf_counter()
    rounds = 5 if quick else 11
    for repeat in range(rounds):
        for coll, algo, actual, call, iters, times in configs:
            # the configs before this one pushed its buffer out of the cache, where the bench's
            # back-to-back calls find it: untimed, that first call cost 1-16 MiB 10-25 % more
            call()
            comm.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            times.append((time.perf_counter() - t0) / iters)
        # a busy machine makes everything slow: keep to the time budget once 3 repeats are in
        late = time.perf_counter() - start > (5 if quick else 30)
        stop = repeat >= 2 and comm.mpi.bcast(late, root=0)
        if on_round is not None:  # the command line's progress
            on_round(repeat + 1, repeat + 1 if stop else rounds)
        if stop:
            break
    per_rank = comm.mpi.allgather([statistics.median(c[5]) for c in configs])
    return [Sample(coll, algo, comm.size, actual, max(t))
            for (coll, algo, actual, *_), t in zip(configs, zip(*per_rank))]
