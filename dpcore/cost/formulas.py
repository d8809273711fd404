"""Alpha-beta-gamma costs of each collective under each algorithm.

Notation, used in every docstring here: n ranks, S bytes (the whole buffer: the input of
all_reduce, reduce_scatter and reduce, the output of all_gather and gather, the payload of
broadcast, the root's input of scatter, every rank's input of all_to_all; nccl-tests' `size`), a
chunk is S/n (one rank's share). Each function returns a Cost: steps (messages on
the critical path), bytes through one rank's port, bytes reduced. Time = alpha*steps +
beta*bytes + gamma*reduced (Params.time). The model assumes one port per rank that sends and
receives at once (full duplex) and that a step lasts as long as its busiest port.

The ring's, one_shot's and direct's counts are their rows of the table of collectives
(dpcore.collectives, csrc/include/dpcore/coll_table.h); the docstrings derive them. The log-step
algorithms (binary tree, recursive doubling, Rabenseifner) live in trees.py. Not every algorithm
runs every collective: algorithms(coll) lists those that do (the table's, and the textbook ones
that apply), and the others are refused with a ValueError that names them.

Point to point (send/recv) is not a collective and has no table row: one message of S bytes
between two ranks, T = alpha + S beta (send_recv).
"""
import math

from .. import collectives
from .params import Cost
from .trees import binary_tree, rabenseifner, recursive_doubling

COLLECTIVES = collectives.MOVING  # all but barrier
# dpcore's FIFO slot (DPCORE_SLOT_BYTES): the pipelining segment of the ring broadcast.
SEGMENT_BYTES = 64 << 10


def ring(coll, S, n, segment=SEGMENT_BYTES):
    """Ring: rank r sends to r+1 and receives from r-1; every step moves one chunk (S/n).

    reduce_scatter: n-1 steps; at step k rank r sends chunk r-k-1 and adds the chunk r-k-2 it
        receives to its own data, so after n-1 steps it holds chunk r complete.
        T = (n-1) alpha + (n-1)/n S beta + (n-1)/n S gamma
    all_gather: n-1 steps; at step k rank r forwards chunk r-k.
        T = (n-1) alpha + (n-1)/n S beta
    all_reduce: reduce_scatter then all_gather: 2(n-1) steps, each rank sends 2(n-1)/n S,
        which no algorithm can beat for large S (every byte must leave and enter every rank
        about once): T = 2(n-1) alpha + 2(n-1)/n S beta + (n-1)/n S gamma
    broadcast: a chain root -> root+1 -> ... cut into m = ceil(S / segment) segments; segment i
        leaves the root at step i and reaches the last rank n-2 steps later, so the chain runs
        n+m-2 steps of S/m bytes: T = (n+m-2) (alpha + S/m beta), about S beta for large S.
    reduce: the broadcast's chain run backwards, root+1 -> ... -> root: every rank but the first
        adds its input to the segment it receives before passing it on, the root keeps the sum.
        T = (n+m-2) (alpha + S/m beta + S/m gamma)
    gather, scatter, all_to_all: no ring (dpcore runs them one_shot or direct).
    """
    check_runs(coll, "ring")
    if n <= 1:
        return Cost()
    counts = collectives.algo_cost(coll, "ring")
    if not counts.chain:
        return _table_cost(counts, S, n)
    m = max(1, math.ceil(S / segment))
    steps = counts.steps.of(n, 1) + m - 1  # each segment after the first adds a step
    # a reducing chain adds every segment it passes on: the critical path reduces what it moves
    return Cost(steps, steps * S / m, steps * S / m if counts.reduced.chunks else 0)


def one_shot(coll, S, n):
    """dpcore's small-message algorithm over shared memory: every rank copies its input into its
    own slot, waits once for all slots to be filled, then reads what it needs from every slot
    and reduces in rank order (so all ranks compute identical bits). One wait, so one alpha;
    beta here is per byte through the shared slots (written or read).

    all_reduce: write S, read all n slots (n S), reduce (n-1) S.
        T = alpha + (n+1) S beta + (n-1) S gamma
    reduce_scatter: write S, read chunk r of every slot (n * S/n = S), reduce (n-1)/n S.
        T = alpha + 2 S beta + (n-1)/n S gamma
    all_gather: write the own chunk S/n, read the n-1 others.   T = alpha + S beta
    broadcast: the root writes S, then every other rank reads S.   T = alpha + 2 S beta
    reduce: every rank writes S, the root reads all n slots and reduces them.
        T = alpha + (n+1) S beta + (n-1) S gamma
    gather: every rank writes its shard (S/n), the root reads the n-1 others.   T = alpha + S beta
    scatter: the root writes the n-1 shards that are not its own, each rank reads its own.
        T = alpha + S beta
    all_to_all: every rank writes its input S, then reads its chunk from every slot (n S/n).
        T = alpha + 2 S beta
    Bandwidth grows with n (every rank reads everything), so it wins only for small S.
    """
    check_runs(coll, "one_shot")
    return _table_cost(collectives.algo_cost(coll, "one_shot"), S, n) if n > 1 else Cost()


def direct(coll, S, n):
    """dpcore's single-copy algorithm on one node: every rank reads what it needs straight out
    of the peers' buffers (process_vm_readv), so a byte moves once where the ring's FIFO moves
    it twice (into a slot, out of it), and the only waits are for all ranks at once. Its alpha
    is that all-rank wait; its beta is a kernel copy, not a FIFO hop.

    all_reduce: rank r reads chunk r of every peer's input and reduces it into its output; one
        wait until every chunk is complete; then it reads chunk q from every peer q's output.
        T = 2 alpha + 2(n-1)/n S beta + (n-1)/n S gamma   (the ring's bytes, 2 waits, not 2(n-1))
    reduce_scatter: the first half.   T = alpha + (n-1)/n S beta + (n-1)/n S gamma
    all_gather: rank r reads shard q from every peer q.   T = alpha + (n-1)/n S beta
    broadcast: every rank reads S from the root, whose memory serves the n-1 readers at once.
        T = alpha + (n-1) S beta
    reduce: the root reads every peer's S and reduces it.   T = alpha + (n-1) S (beta + gamma)
    gather: every peer writes its shard (S/n) into the root's output, all at once (the root's
        memory takes them in).   T = alpha + (n-1)/n S beta
    scatter: every rank reads its shard out of the root's input.   T = alpha + (n-1)/n S beta
    all_to_all: rank r reads chunk r of every peer's input.   T = alpha + (n-1)/n S beta
        (without mapped peer memory (MPI) each chunk is one message, n-1 pairwise steps, which
        the model still counts as one wait)
    """
    check_runs(coll, "direct")
    return _table_cost(collectives.algo_cost(coll, "direct"), S, n) if n > 1 else Cost()


def _table_cost(counts, S, n):
    """A Cost from the table's counts (dpcore.collectives.AlgoCost) for n ranks and S bytes."""
    return Cost(counts.steps.of(n, 1), counts.bytes.of(n, S), counts.reduced.of(n, S))


def naive(coll, S, n):
    """A parameter server: rank 0 (the root for broadcast) talks to each worker in turn, so its
    port carries everything and it sends or receives n-1 messages one after another.

    all_reduce: n-1 workers each send S (the server adds them up), then the server sends the
        sum back to each: T = 2(n-1) alpha + 2(n-1) S beta + (n-1) S gamma
    reduce_scatter: the same gather, then each worker gets only its chunk:
        T = 2(n-1) alpha + (n-1)(1 + 1/n) S beta + (n-1) S gamma
    all_gather: each worker sends its chunk, then receives the n-1 chunks it lacks:
        T = 2(n-1) alpha + ((n-1)/n + (n-1)^2/n) S beta = 2(n-1) alpha + (n-1) S beta
    broadcast: the root sends S to each rank in turn: T = (n-1) (alpha + S beta)
    reduce: the workers send S to the root in turn, which adds each up:
        T = (n-1) (alpha + S beta + S gamma)
    gather: each worker in turn sends the root its shard: T = (n-1) (alpha + S/n beta)
    scatter: the root sends each worker its shard in turn: T = (n-1) (alpha + S/n beta)
    Cost grows linearly in n for both terms: the reason collectives are not done this way.
    """
    check_runs(coll, "naive")
    if n <= 1:
        return Cost()
    if coll == "reduce":
        return Cost(n - 1, (n - 1) * S, (n - 1) * S)
    if coll in ("gather", "scatter"):
        return Cost(n - 1, (n - 1) * S / n)
    if coll == "all_reduce":
        return Cost(2 * (n - 1), 2 * (n - 1) * S, (n - 1) * S)
    if coll == "reduce_scatter":
        return Cost(2 * (n - 1), (n - 1) * (1 + 1 / n) * S, (n - 1) * S)
    if coll == "all_gather":
        return Cost(2 * (n - 1), (n - 1) * S)
    return Cost(n - 1, (n - 1) * S)


def hierarchical(coll, S, n, local_size, segment=SEGMENT_BYTES):
    """Nodes of k = local_size ranks, N = n/k nodes; rings inside a node use the fast link
    (alpha, beta), rings between nodes the slow one (inter_alpha, inter_beta). Rank j*k + l is
    local rank l of node j.

    all_reduce: ring reduce_scatter inside each node (k ranks, S), so local rank l holds 1/k of
        the node's sum; ring all_reduce of that S/k among the N ranks with local rank l (one per
        node, all N-rank rings at once, each on its own link); ring all_gather inside the node.
        T = 2(k-1) alpha + 2(k-1)/k S beta + 2(N-1) alpha_inter + 2(N-1)/N S/k beta_inter
            + ((k-1)/k S + (N-1)/N S/k) gamma
        The slow link carries only S/k per rank instead of S: why it wins between nodes.
    reduce_scatter: the intra-node then the inter-node reduce_scatter (no all-gathers).
    all_gather: the inter-node all_gather of S/k, then the intra-node one of S.
    broadcast: a chain over the N nodes, then a chain inside every node (not overlapped).
    """
    check_runs(coll, "hierarchical")
    if n % local_size:
        raise ValueError(f"hierarchical: {n} ranks do not split into nodes of {local_size}")
    k, N = local_size, n // local_size
    if coll == "all_reduce":
        return ring("reduce_scatter", S, k) + _inter(ring("all_reduce", S / k, N)) + \
            ring("all_gather", S, k)
    if coll == "reduce_scatter":
        return ring("reduce_scatter", S, k) + _inter(ring("reduce_scatter", S / k, N))
    if coll == "all_gather":
        return _inter(ring("all_gather", S / k, N)) + ring("all_gather", S, k)
    return _inter(ring("broadcast", S, N, segment)) + ring("broadcast", S, k, segment)


def _inter(c):
    """The same steps and bytes, on the between-node link (the reduction still runs locally)."""
    return Cost(0, 0, c.reduced, c.steps, c.nbytes)


# Each algorithm's function: its docstring is the derivation (explain prints it).
FUNCTIONS = {"ring": ring, "one_shot": one_shot, "direct": direct,
             "recursive_doubling": recursive_doubling,
             "rabenseifner": rabenseifner, "binary_tree": binary_tree, "naive": naive,
             "hierarchical": hierarchical}
ALGORITHMS = tuple(FUNCTIONS)

# The collectives each textbook algorithm runs here (the table says which of ring, one_shot and
# direct run which): all four of the original collectives; the rooted ones where a tree or a
# server makes sense; none runs all_to_all, and Rabenseifner and hierarchical only the four.
_CLASSIC = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")
_ROOTED = ("reduce", "gather", "scatter")
_TEXTBOOK = {"recursive_doubling": _CLASSIC + _ROOTED, "rabenseifner": _CLASSIC,
             "binary_tree": _CLASSIC + _ROOTED, "naive": _CLASSIC + _ROOTED,
             "hierarchical": _CLASSIC}


def algorithms(coll):
    """The algorithms that run coll, in ALGORITHMS' order."""
    table = collectives.get(coll).algorithms
    return tuple(a for a in ALGORITHMS if a in table or coll in _TEXTBOOK.get(a, ()))


def check_runs(coll, algo):
    """ValueError unless algo runs coll, naming those that do."""
    if algo not in algorithms(coll):
        raise ValueError(f"{algo} does not run {coll}; its algorithms: "
                         f"{', '.join(algorithms(coll))}")


def send_recv(nbytes):
    """Point to point: one message of S bytes from one rank to another (send and its recv), one
    alpha and S through each of the two ports: T = alpha + S beta. A ring exchange (every rank
    sends to the next and receives from the previous at once, nccl-tests' sendrecv) costs the
    same per rank on full-duplex ports."""
    return Cost(1, float(nbytes))


def cost(coll, algo, nbytes, n, local_size=None, segment=SEGMENT_BYTES):
    """Cost of one collective (see the algorithm's function for the formula and derivation)."""
    if coll not in COLLECTIVES:
        raise ValueError(f"unknown collective {coll!r}; expected one of {', '.join(COLLECTIVES)}")
    S, n = float(nbytes), int(n)
    if algo not in FUNCTIONS:
        raise ValueError(f"unknown algorithm {algo!r}; expected one of {', '.join(ALGORITHMS)}")
    check_runs(coll, algo)
    if algo == "ring":
        return ring(coll, S, n, segment)
    if algo == "hierarchical":
        if not local_size:
            raise ValueError("hierarchical needs local_size (ranks per node)")
        return hierarchical(coll, S, n, int(local_size), segment)
    return FUNCTIONS[algo](coll, S, n)


def derivation(coll, algo):
    """The paragraph of the algorithm's docstring about this collective: the formula and why."""
    import inspect

    lines = inspect.getdoc(FUNCTIONS[algo]).splitlines()
    out = []
    for line in lines:
        if out and line.startswith("    "):
            out.append(line)
        elif out:
            break
        elif line.startswith(coll) and line[len(coll):len(coll) + 2] in (": ", " ("):
            out.append(line)
    return "\n".join(out)
