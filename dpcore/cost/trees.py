"""Algorithms with about log2(n) steps: binary tree, recursive doubling, Rabenseifner.

Notation as in formulas.py: n ranks, S bytes, a chunk is S/n, one full-duplex port per rank.
For recursive doubling and Rabenseifner, p = 2^floor(log2 n) "core" ranks run the butterfly and
the r = n - p extra ranks are folded in as MPICH does: extra rank p+i first hands its data to
core rank i and gets the result back at the end (2 more steps; none when n is a power of two).
"""
from .params import Cost
from .units import log2_ceil, log2_floor


def _fold(n):
    """(p, r, L, W): core ranks, extra ranks, log2 p, and W = chunks on the critical path of
    one recursive-halving (or doubling) pass over the core: at distance d a rank sends d core
    shares, and the first min(d, r) core shares also carry an extra rank's chunk, so
    W = sum over d = 1, 2, .., p/2 of (d + min(d, r)); W = n - 1 when n is a power of two."""
    p = 1 << log2_floor(n)
    r = n - p
    L = log2_floor(p)
    W = sum((1 << i) + min(1 << i, r) for i in range(L))
    return p, r, L, W


def recursive_doubling(coll, S, n):
    """Recursive doubling (a butterfly): at step k rank q exchanges with rank q XOR 2^k.

    all_reduce: log2 n steps, each exchanging and reducing the whole buffer:
        T = log2(n) (alpha + S beta + S gamma)        (n a power of two)
        other n: + 2 alpha + 2 S beta + S gamma for the fold (hand over S, reduce, get S back).
    reduce_scatter (recursive halving): at distance d = n/2, n/4, .., 1 a rank sends the half
        of its current range that its partner keeps, and reduces the half it keeps:
        T = log2(n) alpha + (n-1)/n S (beta + gamma)  (n a power of two)
        other n: fold (alpha + S beta + S gamma), W chunks, unfold (alpha + S/n beta).
    all_gather: the reverse: at distance d = 1, 2, .., n/2 a rank sends all it has (d chunks):
        T = log2(n) alpha + (n-1)/n S beta            (n a power of two)
        other n: fold in (alpha + S/n beta), W chunks, unfold ((n-1)/n S to each extra).
    broadcast: a binomial tree, the ranks that have the data double every step:
        T = ceil(log2 n) (alpha + S beta)
    reduce: the binomial tree run backwards, every receiver adds what comes in:
        T = ceil(log2 n) (alpha + S beta + S gamma)
    scatter: a binomial scatter: at distance d the holder sends the next min(d, n-d) chunks,
        ceil(log2 n) steps of (n-1)/n S in all when n is a power of two.
    gather: the binomial scatter run backwards: the same steps and bytes.
    Few steps (latency-optimal) but all_reduce moves S per step: log2(n) S instead of the
    ring's 2S, so it wins for small S only.
    """
    if n <= 1:
        return Cost()
    p, r, L, W = _fold(n)
    f = 1 if r else 0
    chunk = S / n
    if coll == "all_reduce":
        return Cost(L + 2 * f, (L + 2 * f) * S, (L + f) * S)
    if coll == "reduce_scatter":
        return Cost(L + 2 * f, f * (S + chunk) + W * chunk, f * S + W * chunk)
    if coll == "all_gather":
        return Cost(L + 2 * f, f * S + W * chunk)
    if coll in ("gather", "scatter"):
        return binomial_scatter(S, n)
    steps = log2_ceil(n)
    return Cost(steps, steps * S, steps * S if coll == "reduce" else 0)


def binomial_scatter(S, n):
    """ceil(log2 n) steps; at distance d the holder sends min(d, n-d) chunks."""
    Lc = log2_ceil(n)
    return Cost(Lc, sum(min(1 << i, n - (1 << i)) for i in range(Lc)) * S / n)


def rabenseifner(coll, S, n):
    """Rabenseifner: a reduce-scatter by recursive halving, then an all-gather by recursive
    doubling; the butterfly's few steps with the ring's bandwidth.

    all_reduce: T = 2 log2(n) alpha + 2(n-1)/n S beta + (n-1)/n S gamma   (n a power of two)
        other n: + 2 alpha + 2 S beta + S gamma for the fold, and 2W chunks instead of 2(n-1).
    reduce_scatter: its first half, recursive halving (the same as recursive_doubling's).
    all_gather: its second half, recursive doubling (the same as recursive_doubling's).
    broadcast (van de Geijn): a binomial scatter (at distance d the holder sends the next
        min(d, n-d) chunks: ceil(log2 n) steps, (n-1)/n S when n is a power of two) followed by
        the recursive-doubling all_gather: about 2 log2(n) alpha + 2 S beta.
    """
    if n <= 1:
        return Cost()
    p, r, L, W = _fold(n)
    f = 1 if r else 0
    chunk = S / n
    if coll == "all_reduce":
        return Cost(2 * L + 2 * f, 2 * f * S + 2 * W * chunk, f * S + W * chunk)
    if coll in ("reduce_scatter", "all_gather"):
        return recursive_doubling(coll, S, n)
    return binomial_scatter(S, n) + recursive_doubling("all_gather", S, n)


def tree_levels(n):
    """For a binary tree in heap order (parent of i is (i-1)//2, rank 0 at the top): for every
    level below the root, the largest subtree among its left children (odd i) and among its
    right children (even i), 0 where the level has none. A parent talks to its left child,
    then to its right one, so each present side is one step."""
    def subtree(i):
        size, lo, hi = 0, i, i
        while lo < n:
            size += min(hi, n - 1) - lo + 1
            lo, hi = 2 * lo + 1, 2 * hi + 2
        return size

    levels = []
    d = 1
    while (1 << d) - 1 < n:
        ids = range((1 << d) - 1, min((1 << (d + 1)) - 1, n))
        left = max((subtree(i) for i in ids if i % 2), default=0)
        right = max((subtree(i) for i in ids if i % 2 == 0), default=0)
        levels.append((left, right))
        d += 1
    return levels


def binary_tree(coll, S, n):
    """Binary tree (heap order, rank 0 or the broadcast root on top). Let h be the number of
    (level, side) pairs: about 2 log2 n, since a parent serves its two children one after the
    other (h = 2 floor(log2 n), minus 1 when n is a power of two).

    broadcast: every parent forwards S to each child: T = h (alpha + S beta)
    all_reduce: reduce up (each parent adds each child's S), then broadcast down:
        T = 2h alpha + 2h S beta + h S gamma
    reduce_scatter: reduce up, then scatter down: a child receives the chunks of its subtree,
        about S/2 at the first level, S/4 at the next..., so about 2S in all.
    all_gather: gather up (a child sends its subtree's chunks), then broadcast S down.
    reduce: the reduce up alone (the root on top): T = h alpha + h S beta + h S gamma
    gather, scatter: the gather up, or the scatter down, alone (subtrees' chunks).
    Not pipelined here (NCCL pipelines a double binary tree; then the S terms shrink to ~2S).
    """
    if n <= 1:
        return Cost()
    levels = tree_levels(n)
    h = sum((left > 0) + (right > 0) for left, right in levels)
    chunk = S / n
    subtrees = Cost(h, sum(left + right for left, right in levels) * chunk)
    down = Cost(h, h * S)
    up = Cost(h, h * S, h * S)
    if coll == "broadcast":
        return down
    if coll == "reduce":
        return up
    if coll in ("gather", "scatter"):
        return subtrees
    if coll == "all_reduce":
        return up + down
    if coll == "reduce_scatter":
        return up + subtrees
    return subtrees + down
