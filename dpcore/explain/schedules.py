"""Every collective under every algorithm, as a list of steps over pieces of the buffer.

The flat ring is not rebuilt here: it comes from dpcore._C.ring_trace, the verbs the real C++
templates (csrc/algo/ring.h) run on one rank, so what `explain` shows is what dpcore does.
"""
from .. import collectives
from . import blocks as b
from .sim import ScheduleError, Step, Transfer

SEND_VERBS = {"send", "recvReduceSend", "recvReduceCopySend", "recvCopySend", "copySend"}


def ring_from_trace(coll, n, root=0, segments=1):
    """Steps of dpcore's ring read off ring_trace: verb t of rank r sends at step t (all-reduce,
    reduce-scatter, all-gather) or at step round + position (the chains: broadcast's from the
    root, reduce's from root+1 to the root), and the next rank's matching verb must receive the
    same piece."""
    from .._C import ring_trace

    if collectives.algo_cost(coll, "ring").chain:
        # one element per segment, one segment per round
        traces = [ring_trace(coll, segments, r, n, 1, root) for r in range(n)]
        first = root + (coll == "reduce")
        when = lambda r, i: i + (r - first) % n  # noqa: E731
        answer = lambda r, i: (traces[(r + 1) % n][i], i)  # noqa: E731
    else:
        # one element per chunk and one round, so an element offset is a chunk index
        counts = [1] * n if collectives.get(coll).output == "sum_of_shards" else []
        traces = [ring_trace(coll, n, r, n, 1, 0, counts) for r in range(n)]
        when = lambda r, i: i  # noqa: E731
        answer = lambda r, i: (traces[(r + 1) % n][i + 1], i + 1)  # noqa: E731
    moves = {}
    for r in range(n):
        for i, (verb, start, _) in enumerate(traces[r]):
            if verb not in SEND_VERBS:
                continue
            (rverb, rstart, _), _ = answer(r, i)
            if not rverb.startswith("recv") or rstart != start:
                raise ScheduleError(f"ring_trace: rank {r} {verb} piece {start} but rank "
                                    f"{(r + 1) % n} answers {rverb} piece {rstart}")
            t = Transfer(r, (r + 1) % n, (start,), "Reduce" in rverb)
            moves.setdefault(when(r, i), []).append(t)
    phase = {"reduce_scatter": "reduce-scatter", "all_gather": "all-gather",
             "broadcast": "chain", "reduce": "chain"}
    return [Step(moves[t], phase.get(coll) or ("reduce-scatter" if t < n - 1 else "all-gather"))
            for t in sorted(moves)]


def ring_python(coll, n, root=0, segments=1):
    """The same ring from the Python blocks (ring.h's formulas); tests compare the two."""
    group, parts = list(range(n)), [(c,) for c in range(n)]
    if coll == "all_reduce":
        return b.ring_reduce_scatter(group, parts) + b.ring_all_gather(group, parts)
    if coll == "reduce_scatter":
        return b.ring_reduce_scatter(group, parts)
    if coll == "all_gather":
        return b.ring_all_gather(group, parts)
    if coll == "reduce":
        return b.ring_chain([(root + 1 + i) % n for i in range(n)], list(range(segments)),
                            reduce=True)
    return b.ring_chain([(root + i) % n for i in range(n)], list(range(segments)))


def one_shot(coll, n, root=0):
    """Step 0: every rank copies its input into its own slot (no waiting). Step 1: after one
    wait for all slots, every rank reads what it needs from every slot, in rank order."""
    every = tuple(range(n))
    slot = lambda q: ("slot", q)  # noqa: E731
    others = [r for r in range(n) if r != root]
    if coll in ("gather", "scatter", "all_to_all", "reduce"):
        write, read = _one_shot_rooted(coll, n, root, every, slot, others)
    elif coll == "broadcast":
        write = [Transfer(root, slot(root), every, False)]
        read = [Transfer(slot(root), r, every, False) for r in range(n) if r != root]
    elif coll == "all_gather":
        write = [Transfer(r, slot(r), (r,), False) for r in range(n)]
        read = [Transfer(slot(q), r, (q,), False) for r in range(n) for q in range(n) if q != r]
    else:
        mine = (lambda r: every) if coll == "all_reduce" else (lambda r: (r,))
        write = [Transfer(r, slot(r), every, False) for r in range(n)]
        read = [Transfer(slot(q), r, mine(r), q > 0) for r in range(n) for q in range(n)]
    return [Step(write, "write own slot", sync=False), Step(read, "read every slot")]


def _one_shot_rooted(coll, n, root, every, slot, others):
    """one_shot's writes and reads for reduce, gather, scatter and all_to_all (whose piece
    p*n + q is rank p's chunk for rank q)."""
    if coll == "reduce":  # the root reads every slot, its own included, in rank order
        return ([Transfer(r, slot(r), every, False) for r in range(n)],
                [Transfer(slot(q), root, every, q > 0) for q in range(n)])
    if coll == "gather":
        return ([Transfer(r, slot(r), (r,), False) for r in range(n)],
                [Transfer(slot(q), root, (q,), False) for q in others])
    if coll == "scatter":  # the root's own shard stays where it is
        return ([Transfer(root, slot(root), tuple(others), False)],
                [Transfer(slot(root), r, (r,), False) for r in others])
    return ([Transfer(r, slot(r), tuple(r * n + q for q in range(n)), False) for r in range(n)],
            [Transfer(slot(p), r, (p * n + r,), False) for r in range(n) for p in range(n)])


def direct(coll, n, root=0):
    """Every rank reads from the peers' own buffers, no slots in between. Reductions: rank r
    reads chunk r of every peer's input and adds it up; after one wait for all chunks,
    all_reduce reads every other chunk from its owner's output."""
    others = lambda r: [q for q in range(n) if q != r]  # noqa: E731
    if coll == "reduce":
        return [Step([Transfer(q, root, tuple(range(n)), True) for q in others(root)],
                     "the root reduces every peer's input")]
    if coll == "gather":
        return [Step([Transfer(q, root, (q,), False) for q in others(root)],
                     "every peer writes its shard into the root's output")]
    if coll == "scatter":
        return [Step([Transfer(root, r, (r,), False) for r in others(root)],
                     "read own shard from the root's input")]
    if coll == "all_to_all":
        return [Step([Transfer(q, r, (q * n + r,), False) for r in range(n) for q in others(r)],
                     "read own chunk of every peer's input")]
    if coll == "broadcast":
        return [Step([Transfer(root, r, tuple(range(n)), False) for r in others(root)],
                     "read the root's buffer")]
    if coll == "all_gather":
        return [Step([Transfer(q, r, (q,), False) for r in range(n) for q in others(r)],
                     "read every peer's shard")]
    reduce = Step([Transfer(q, r, (r,), True) for r in range(n) for q in others(r)],
                  "reduce own chunk from the peers' inputs")
    if coll == "reduce_scatter":
        return [reduce]
    return [reduce, Step([Transfer(q, r, (q,), False) for r in range(n) for q in others(r)],
                         "read the other chunks from the peers' outputs")]


def recursive_doubling(coll, n, root=0):
    if coll in ("reduce", "gather"):  # the binomial broadcast or scatter run backwards
        down = b.binomial(n, root, scatter=coll == "gather", phase="")
        return b.backwards(down, coll == "reduce", f"binomial {coll}")
    if coll == "scatter":
        return b.binomial(n, root, scatter=True, phase="binomial scatter")
    if coll == "all_reduce":
        return b.fold_in(n, True) + b.butterfly_exchange(n) + b.fold_out(n, "all")
    if coll == "reduce_scatter":
        return b.fold_in(n, True) + b.halving(n) + b.fold_out(n, "own")
    if coll == "all_gather":
        return b.fold_in(n, False, own_only=True) + b.doubling(n) + b.fold_out(n, "others")
    return b.binomial(n, root, scatter=False, phase="binomial tree")


def rabenseifner(coll, n, root=0):
    if coll == "all_reduce":
        return b.fold_in(n, True) + b.halving(n) + b.doubling(n) + b.fold_out(n, "all")
    if coll == "broadcast":
        return b.binomial(n, root, scatter=True, phase="scatter (binomial)") + \
            recursive_doubling("all_gather", n)
    return recursive_doubling(coll, n)


def binary_tree(coll, n, root=0):
    every = lambda i: tuple(range(n))  # noqa: E731
    if coll == "reduce":  # the root on top, as the broadcast's
        return b.backwards(b.tree_down(n, root, every, ""), True, "reduce up")
    if coll in ("gather", "scatter"):
        down = b.tree_down(n, root, b.subtree_chunks(n, root), "scatter down")
        return down if coll == "scatter" else b.backwards(down, False, "gather up")
    if coll == "broadcast":
        return b.tree_down(n, root, every, "down the tree")
    if coll == "all_gather":
        return b.tree_up(n, b.subtree_chunks(n), False, "gather up") + \
            b.tree_down(n, 0, every, "down the tree")
    up = b.tree_up(n, every, True, "reduce up")
    if coll == "all_reduce":
        return up + b.tree_down(n, 0, every, "down the tree")
    return up + b.tree_down(n, 0, b.subtree_chunks(n), "scatter down")


def naive(coll, n, root=0):
    every = lambda w: tuple(range(n))  # noqa: E731
    if coll == "reduce":
        return b.server_gather(n, root, every, True, "reduce at the root")
    if coll == "gather":
        return b.server_gather(n, root, lambda w: (w,), False, "gather at the root")
    if coll == "scatter":
        return b.server_scatter(n, root, lambda w: (w,), "root sends")
    if coll == "broadcast":
        return b.server_scatter(n, root, every, "root sends")
    if coll == "all_gather":
        return b.server_gather(n, 0, lambda w: (w,), False, "gather at rank 0") + \
            b.server_scatter(n, 0, lambda w: tuple(c for c in range(n) if c != w),
                             "send back")
    gather = b.server_gather(n, 0, every, True, "reduce at rank 0")
    back = every if coll == "all_reduce" else (lambda w: (w,))
    return gather + b.server_scatter(n, 0, back, "send back")


def hierarchical(coll, n, k, root=0, segments=1):
    """Rank j*k + l is local rank l of node j. Local rank l answers for the chunks
    {j*k + l for every node j} (strided, so that reduce_scatter leaves chunk r on rank r)."""
    N = n // k
    nodes = [[j * k + l for l in range(k)] for j in range(N)]
    lanes = [[j * k + l for j in range(N)] for l in range(k)]   # one rank per node
    inside = [tuple(j * k + l for j in range(N)) for l in range(k)]
    across = lambda lane: [(r,) for r in lane]  # noqa: E731
    rs_in = b.together(*(b.ring_reduce_scatter(g, inside, "node reduce-scatter")
                         for g in nodes))
    ag_in = b.together(*(b.ring_all_gather(g, inside, "node all-gather") for g in nodes))
    rs_x = b.together(*(b.ring_reduce_scatter(g, across(g), "between nodes: reduce-scatter")
                        for g in lanes))
    ag_x = b.together(*(b.ring_all_gather(g, across(g), "between nodes: all-gather")
                        for g in lanes))
    if coll == "all_reduce":
        return rs_in + rs_x + ag_x + ag_in
    if coll == "reduce_scatter":
        return rs_in + rs_x
    if coll == "all_gather":
        return ag_x + ag_in
    jr, lr = divmod(root, k)
    segs = list(range(segments))
    leaders = [((jr + t) % N) * k + lr for t in range(N)]
    chains = [[j * k + (lr + t) % k for t in range(k)] for j in range(N)]
    return b.ring_chain(leaders, segs, "chain between nodes") + \
        b.together(*(b.ring_chain(c, segs, "chain in every node") for c in chains))
