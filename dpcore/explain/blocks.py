"""Building blocks of schedules: each returns a list of Steps (see sim.py).

Ring blocks act on a group (ranks in ring order) and its parts (one tuple of pieces per
position: the chunk that position ends up owning); several groups run at once with `together`.
Butterfly and tree blocks act on all n ranks with one chunk per rank.
"""
from itertools import zip_longest

from .sim import Step, Transfer


def backwards(steps, reduce, phase):
    """The steps in reverse order, every transfer turned round: a broadcast tree run backwards
    is a reduce (reduce=True: receivers add) and a scatter run backwards a gather."""
    return [Step([Transfer(t.dst, t.src, t.pieces, reduce) for t in s.transfers], phase)
            for s in reversed(steps)]


def together(*schedules):
    """Run schedules side by side: their k-th steps happen at the same time."""
    steps = []
    for parallel in zip_longest(*schedules):
        here = [s for s in parallel if s is not None]
        steps.append(Step([t for s in here for t in s.transfers], here[0].phase, here[0].sync))
    return steps


# -- rings: the formulas of csrc/include/dpcore/chunks.h ------------------------------------------

def ring_reduce_scatter(group, parts, phase="reduce-scatter"):
    """Step k: position p sends part p-k-1 and adds part p-k-2 from p-1; after m-1 steps
    position p holds part p complete."""
    m = len(group)
    return [Step([Transfer(group[p], group[(p + 1) % m], parts[(p - k - 1) % m], True)
                  for p in range(m)], phase) for k in range(m - 1)]


def ring_all_gather(group, parts, phase="all-gather"):
    """Step k: position p forwards part p-k (its own at step 0)."""
    m = len(group)
    return [Step([Transfer(group[p], group[(p + 1) % m], parts[(p - k) % m], False)
                  for p in range(m)], phase) for k in range(m - 1)]


def ring_chain(chain, segments, phase="chain", reduce=False):
    """Broadcast down chain[0] -> chain[1] -> ...: segment i leaves the root at step i, so at
    step t position p forwards segment t-p; m + len(chain) - 2 steps in all. reduce: every
    receiver adds what comes in (a reduce, whose chain ends at the root)."""
    m, length = len(segments), len(chain)
    if length < 2:
        return []
    steps = []
    for t in range(m + length - 2):
        moves = [Transfer(chain[p], chain[p + 1], (segments[t - p],), reduce)
                 for p in range(length - 1) if 0 <= t - p < m]
        steps.append(Step(moves, phase))
    return steps


# -- butterflies: core ranks 0..p-1, extra ranks p..n-1 folded onto 0..r-1 -------------------

def core(n):
    p = 1 << (n.bit_length() - 1)
    return p, n - p


def _groups(n):
    """Chunks each core rank answers for: its own, and the chunk of the extra rank folded
    onto it."""
    p, r = core(n)
    return [(q, p + q) if q < r else (q,) for q in range(p)]


def fold_in(n, reduce, own_only=False, phase="fold"):
    """Extra rank p+i hands core rank i its data (all chunks, or only its own chunk)."""
    p, r = core(n)
    if not r:
        return []
    every = tuple(range(n))
    return [Step([Transfer(p + i, i, (p + i,) if own_only else every, reduce)
                  for i in range(r)], phase)]


def fold_out(n, chunks="all", phase="unfold"):
    """Core rank i returns to extra rank p+i all chunks, its own chunk, or all it lacks."""
    p, r = core(n)
    if not r:
        return []
    pick = {"all": lambda i: tuple(range(n)), "own": lambda i: (p + i,),
            "others": lambda i: tuple(c for c in range(n) if c != p + i)}[chunks]
    return [Step([Transfer(i, p + i, pick(i), False) for i in range(r)], phase)]


def butterfly_exchange(n, phase="exchange"):
    """Recursive doubling on the core: at distance d = 1, 2, .. rank q swaps the whole
    buffer with q XOR d and both add what they receive."""
    p, _ = core(n)
    every = tuple(range(n))
    return [Step([Transfer(q, q ^ d, every, True) for q in range(p)], phase)
            for d in _distances(p)]


def halving(n, phase="reduce-scatter (halving)"):
    """Recursive halving on the core: at distance d = p/2, p/4, .., 1 rank q keeps the half of
    its range that holds its own group and sends the other half to q XOR d, which adds it."""
    p, _ = core(n)
    groups = _groups(n)
    steps = []
    for d in reversed(_distances(p)):
        moves = []
        for q in range(p):
            lo = q & ~(2 * d - 1)
            give = range(lo, lo + d) if q & d else range(lo + d, lo + 2 * d)
            moves.append(Transfer(q, q ^ d, tuple(c for g in give for c in groups[g]), True))
        steps.append(Step(moves, phase))
    return steps


def doubling(n, phase="all-gather (doubling)"):
    """Recursive doubling on the core: at distance d = 1, 2, .. rank q sends everything it has
    gathered (the d groups of its aligned range) to q XOR d."""
    p, _ = core(n)
    groups = _groups(n)
    steps = []
    for d in _distances(p):
        moves = []
        for q in range(p):
            lo = q & ~(d - 1)
            moves.append(Transfer(q, q ^ d, tuple(c for g in range(lo, lo + d)
                                                  for c in groups[g]), False))
        steps.append(Step(moves, phase))
    return steps


def _distances(p):
    return [1 << i for i in range(p.bit_length() - 1)]


def binomial(n, root, scatter, phase):
    """Binomial tree from root: at distance d = 2^(L-1), .., 1 every holder at relative position
    q (a multiple of 2d) sends to q+d the whole buffer, or (scatter) the chunks of
    positions q+d .. q+2d-1."""
    L = (n - 1).bit_length()
    rank = lambda q: (q + root) % n  # noqa: E731
    steps = []
    for i in reversed(range(L)):
        d = 1 << i
        moves = []
        for q in range(0, n, 2 * d):
            if q + d < n:
                what = tuple(rank(j) for j in range(q + d, min(q + 2 * d, n))) if scatter \
                    else tuple(range(n))
                moves.append(Transfer(rank(q), rank(q + d), what, False))
        steps.append(Step(moves, phase))
    return steps


# -- binary tree in heap order: parent of position i is (i-1)//2 ----------------------------

def _tree_sides(n):
    """[(level, side, positions)], top level first; a parent serves left then right child."""
    out, d = [], 1
    while (1 << d) - 1 < n:
        ids = range((1 << d) - 1, min((1 << (d + 1)) - 1, n))
        for side, parity in (("left", 1), ("right", 0)):
            kids = [i for i in ids if i % 2 == parity]
            if kids:
                out.append((d, side, kids))
        d += 1
    return out


def _subtree(i, n):
    out, level = [], [i]
    while level:
        out += level
        level = [c for j in level for c in (2 * j + 1, 2 * j + 2) if c < n]
    return tuple(out)


def tree_down(n, root, what, phase):
    """Top level first, each parent sends to its children: what(i) gives the pieces for the
    child at position i (the whole buffer, or its subtree's chunks)."""
    rank = lambda i: (i + root) % n  # noqa: E731
    return [Step([Transfer(rank((i - 1) // 2), rank(i), what(i), False) for i in kids], phase)
            for _, _, kids in _tree_sides(n)]


def tree_up(n, what, reduce, phase):
    """Deepest level first, each child sends to its parent (root 0): the whole buffer to be
    added (reduce), or its subtree's chunks (gather)."""
    return [Step([Transfer(i, (i - 1) // 2, what(i), reduce) for i in kids], phase)
            for _, _, kids in reversed(_tree_sides(n))]


def subtree_chunks(n, root=0):
    return lambda i: tuple((j + root) % n for j in _subtree(i, n))


# -- parameter server ----------------------------------------------------------------------

def server_gather(n, root, what, reduce, phase):
    """Each worker in turn sends the server (root) what(worker): one message per step."""
    return [Step([Transfer(w, root, what(w), reduce)], phase) for w in range(n) if w != root]


def server_scatter(n, root, what, phase):
    return [Step([Transfer(root, w, what(w), False)], phase) for w in range(n) if w != root]
