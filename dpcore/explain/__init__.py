"""dpcore.explain: watch a collective run, step by step, without MPI.

    sim = simulate("all_reduce", "ring", n=4)
    sim.steps          # each step's transfers: (src, dst, pieces, reduce?)
    sim.states         # after each step: holder -> per piece, the set of ranks summed in it
    sim.reductions     # reduce operations per piece, over all ranks
    sim.cost           # the steps, bytes and reduced bytes the cost model charges
    sim.check()        # raises ScheduleError unless every rank holds what it should

Command line: python -m dpcore.explain all_reduce --ranks 4 --algo ring
"""
import numpy as np

from .. import collectives
from ..cost.formulas import ALGORITHMS, COLLECTIVES, check_runs
from ..sharding import shard_range
from . import schedules
from .sim import ScheduleError, Simulation, Step, Transfer


def default_local_size(n):
    """Ranks per node for hierarchical when not given: the largest divisor up to n/2, so there
    are at least two nodes (1 for a prime: every rank its own node)."""
    return max(d for d in range(1, n // 2 + 1) if n % d == 0) if n > 1 else 1


def simulate(coll, algo, n, count=None, dtype="float32", root=0, local_size=None,
             segments=None):
    """Run `coll` under `algo` on n simulated ranks; returns a checked Simulation.

    count: elements in the whole buffer (S / itemsize, as in dpcore.cost); default 840 per
    rank, which splits evenly for every n up to 8; uneven counts work too. segments: how many
    segments the broadcast chains (ring, hierarchical) cut the buffer into; default n.
    local_size: ranks per node for hierarchical (default_local_size(n) if not given).
    """
    if coll not in COLLECTIVES:
        raise ValueError(f"unknown collective {coll!r}; expected one of {', '.join(COLLECTIVES)}")
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algo!r}; expected one of {', '.join(ALGORITHMS)}")
    check_runs(coll, algo)
    if n < 1 or not 0 <= root < n:
        raise ValueError(f"need n >= 1 ranks and a root in [0, n), got n={n}, root={root}")
    count = 840 * n if count is None else int(count)
    if count < 0:
        raise ValueError(f"count is a number of elements, 0 or more, not {count}")
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        raise ValueError(f"unknown dtype {dtype!r} (float32, float16, int8, ...)") from None
    k = local_size or default_local_size(n)
    if algo == "hierarchical" and n % k:
        raise ValueError(f"hierarchical: {n} ranks do not split into nodes of {k}")
    ring = collectives.get(coll).algorithms.get("ring")
    chained = ring is not None and ring.chain and algo in ("ring", "hierarchical")
    m = (segments or n) if chained else n
    piece_bytes = [(hi - lo) * itemsize for lo, hi in (shard_range(count, m, i)
                                                       for i in range(m))]
    if coll == "all_to_all":  # piece p*n + q: rank p's chunk for rank q
        piece_bytes = piece_bytes * n
    steps = [] if n == 1 else _steps(coll, algo, n, root, k, m)
    initial, expected = _start_and_goal(coll, n, m, root)
    node_of = (lambda r: r // k) if algo == "hierarchical" else None
    sim = Simulation(coll, algo, n, piece_bytes, "segment" if chained else "chunk", steps,
                     initial, expected, node_of, count, str(np.dtype(dtype)), root, k)
    return sim.run().check()


def _steps(coll, algo, n, root, k, m):
    if algo == "ring":
        return schedules.ring_from_trace(coll, n, root, m)
    if algo == "hierarchical":
        return schedules.hierarchical(coll, n, k, root, m)
    return getattr(schedules, algo)(coll, n, root)


def _start_and_goal(coll, n, m, root):
    """Who holds what at the start, and what each rank must hold at the end (None: anything)."""
    everyone = frozenset(range(n))
    row = collectives.get(coll)
    if coll == "all_to_all":  # piece p*n + q goes from rank p to rank q
        initial = {r: [frozenset([p]) if p == r else None for p in range(n) for _ in range(n)]
                   for r in range(n)}
        expected = {r: [frozenset([p]) if q == r else None for p in range(n) for q in range(n)]
                    for r in range(n)}
    elif coll == "gather":
        initial = {r: [frozenset([r]) if c == r else None for c in range(m)] for r in range(n)}
        expected = {r: [frozenset([c]) if r == root else None for c in range(m)]
                    for r in range(n)}
    elif coll == "scatter":
        initial = {r: [frozenset([root]) if r == root else None] * m for r in range(n)}
        expected = {r: [frozenset([root]) if c == r else None for c in range(m)]
                    for r in range(n)}
    elif row.reduces:
        initial = {r: [frozenset([r])] * m for r in range(n)}
        if coll == "reduce":
            expected = {r: [everyone if r == root else None] * m for r in range(n)}
        elif row.output == "same_as_input":
            expected = {r: [everyone] * m for r in range(n)}
        else:  # its own shard
            expected = {r: [everyone if c == r else None for c in range(m)] for r in range(n)}
    elif row.output == "sum_of_shards":  # all_gather
        initial = {r: [frozenset([r]) if c == r else None for c in range(m)] for r in range(n)}
        expected = {r: [frozenset([c]) for c in range(m)] for r in range(n)}
    else:
        initial = {r: [frozenset([root]) if r == root else None] * m for r in range(n)}
        expected = {r: [frozenset([root])] * m for r in range(n)}
    return initial, expected


__all__ = ["ScheduleError", "Simulation", "Step", "Transfer", "default_local_size", "simulate"]
