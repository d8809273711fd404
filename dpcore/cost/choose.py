"""From costs to decisions: predicted time, where two algorithms cross, which one to use.

This is what algo="auto" will ask: best_algorithm() gives the choice and a one-line reason a
user can print.
"""
import math

from .formulas import ALGORITHMS, SEGMENT_BYTES, algorithms, cost
from .params import params_for
from .units import fmt_bytes, fmt_time


def predict(coll, algo, nbytes, n, params, local_size=None, segment=SEGMENT_BYTES):
    """Predicted seconds for one collective of nbytes (S, see formulas.py) on n ranks.
    params: one Params, or {algo: Params} as `fit` saves them (params_for)."""
    c = cost(coll, algo, nbytes, n, local_size=local_size, segment=segment)
    return params_for(params, algo, coll).time(c, nbytes)


def crossover(coll, algo_a, algo_b, n, params, lo=1, hi=1 << 40, **kw):
    """Smallest size in [lo, hi] bytes where the faster of the two algorithms changes, or None.

    The costs are straight lines in S (apart from the ring broadcast's segment steps), so there
    is at most one crossing in practice; a log-spaced scan finds the sign change and bisection
    pins it down. About a hundred predictions: cache the answer per (collective, ranks).
    """
    def diff(s):
        return (predict(coll, algo_a, s, n, params, **kw) -
                predict(coll, algo_b, s, n, params, **kw))

    sizes = [lo * (hi / lo) ** (i / 64) for i in range(65)]
    for a, b in zip(sizes, sizes[1:]):
        if (diff(a) < 0) != (diff(b) < 0):
            for _ in range(40):
                mid = math.sqrt(a * b)
                if (diff(mid) < 0) == (diff(a) < 0):
                    a = mid
                else:
                    b = mid
            return b
    return None


def best_algorithm(coll, nbytes, n, params, choices=None, limits=None, **kw):
    """(algo, reason): the fastest of `choices` for this size by the model.

    limits: {algo: largest nbytes it accepts} (e.g. one_shot's slot); larger sizes skip it.
    hierarchical is considered only when local_size is given; an algorithm that does not run
    coll never is.
    """
    choices = [a for a in (choices or ALGORITHMS) if a in algorithms(coll)]
    if kw.get("local_size") is None and "hierarchical" in choices:
        choices.remove("hierarchical")
    limits = limits or {}
    allowed = [a for a in choices if nbytes <= limits.get(a, math.inf)]
    if not allowed:
        raise ValueError(f"no algorithm among {choices} accepts {nbytes} bytes")
    # ties (ring and Rabenseifner on 2 ranks) go to the earlier, simpler entry of ALGORITHMS
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    times = sorted((predict(coll, a, nbytes, n, params, **kw), order.get(a, 99), a)
                   for a in allowed)
    times = [(t, a) for t, _, a in times]
    t, best = times[0]
    where = f"{coll} of {fmt_bytes(nbytes, binary=True)} on {n} ranks"
    if len(times) == 1:
        return best, f"{best}: {fmt_time(t)} predicted for {where} (the only choice)"
    t2, second = times[1]
    x = crossover(coll, best, second, n, params, **kw)
    cross = f"; {second} wins {'below' if nbytes >= x else 'above'} " \
        f"{fmt_bytes(x, binary=True)}" if x else ""
    why = "latency-bound" if _latency_share(coll, best, nbytes, n, params, kw) > 0.5 \
        else "bandwidth-bound"
    return best, (f"{best}: {fmt_time(t)} vs {second} {fmt_time(t2)} predicted for {where} "
                  f"({why}{cross})")


def _latency_share(coll, algo, nbytes, n, params, kw):
    p = params_for(params, algo, coll)
    c = cost(coll, algo, nbytes, n, **kw)
    total = p.time(c, nbytes)
    return p.latency(c) / total if total else 1.0
