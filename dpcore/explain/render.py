"""The text picture: for every step, what each rank sends and receives and what it then holds."""
import textwrap

from .. import collectives
from ..cost.formulas import cost, derivation, send_recv
from ..cost.units import fmt_bytes

PICTURES = {
    "ring": "rank r sends to r+1 and receives from r-1 (a broadcast is a chain from the root, a "
            "reduce a chain to it); the schedule is read from dpcore._C.ring_trace, the verbs "
            "csrc/algo/ring.h runs",
    "one_shot": "every rank copies its buffer into its own shared slot, waits once, then reads "
                "the slots it needs and reduces them in rank order",
    "direct": "every rank reads what it needs straight from the peers' buffers "
              "(process_vm_readv; over MPI, one message per chunk): all_reduce reads its own "
              "chunk of every input to reduce, then the other reduced chunks from their owners; "
              "a gather's peers write their shards into the root's output instead "
              "(process_vm_writev), all at once",
    "recursive_doubling": "at each step rank q pairs with q XOR d for d = 1, 2, 4, ..; "
                          "ranks beyond a power of two are folded onto the first ones; a "
                          "broadcast is a binomial tree",
    "rabenseifner": "all_reduce = recursive halving (reduce-scatter) + recursive doubling "
                    "(all-gather); a broadcast is a binomial scatter + the all-gather",
    "binary_tree": "heap order: the parent of position i is (i-1)//2; a parent serves its left "
                   "child, then its right one",
    "naive": "a parameter server: rank 0 (or the root) talks to every worker in turn",
    "hierarchical": "rings inside every node and, between nodes, rings of the ranks with the "
                    "same local rank",
}


def _example(n):
    """The legend's example of a cell, with ranks this run has: '"013" = ranks 0, 1 and 3 added
    up' on 4 ranks or more."""
    ranks = (0, 1, 3) if n >= 4 else (0, 2) if n == 3 else (1,)
    if len(ranks) == 1:
        return f'"{ranks[0]}" = rank {ranks[0]}\'s alone'
    names = ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}"
    return f'"{"".join(map(str, ranks))}" = ranks {names} added up'


def render(sim):
    n = sim.n
    kind = "c" if sim.piece_kind == "chunk" else "s"
    S = sim.nbytes
    head = [f"{sim.coll}, {sim.algo}, {n} rank{'s' * (n != 1)}, count {sim.count} {sim.dtype}: "
            f"S = {fmt_bytes(S)}, a {sim.piece_kind} is {_size_range(sim.piece_bytes)}"]
    head += textwrap.wrap(PICTURES[sim.algo][0].upper() + PICTURES[sim.algo][1:] + ".", 100)
    if sim.algo == "hierarchical":
        head.append(f"{n // sim.local_size} nodes of {sim.local_size} ranks: rank j*"
                    f"{sim.local_size}+l is local rank l of node j.")
    if sim.coll == "all_to_all":
        head.append(f"Chunk p*{n}+q is rank p's chunk for rank q (dpcore.shard_range of its "
                    "input).")
    elif sim.piece_kind == "chunk":
        head.append("Chunk c is rank c's share of the buffer (dpcore.shard_range).")
    else:
        head.append(f"The buffer travels in {len(sim.piece_bytes)} segments (dpcore pipelines "
                    "in 64 KiB segments; --segments sets how many here).")
    head += textwrap.wrap(f'A cell lists whose input a rank holds in that piece: {_example(n)}, '
                          '"all" = every rank\'s, "." = nothing yet; '
                          '* = changed by this step. "add": added to what the rank holds; '
                          '"keep": stored as is.', 100)
    frames = [("start", sim.initial, None, None)] + [
        (f"step {i + 1} of {len(sim.steps)}: {step.phase}", sim.states[i],
         sim.initial if i == 0 else sim.states[i - 1], step) for i, step in enumerate(sim.steps)]
    rows = [_rows(sim, state, prev, kind, step) for _, state, prev, step in frames]
    widths = [max([len(title)] + [len(r[k]) for f in rows for r in f]) + 2
              for k, title in enumerate(("rank", "sends", "receives"))]
    cell = max(5, max(len(c) for f in rows for r in f for c in r[3]) + 2)
    out = head
    for (title, _, _, step), frame in zip(frames, rows):
        out += ["", title + _moved(sim, step)]
        cols = ["rank"] + ([] if step is None else ["sends", "receives"])
        piece_names = "".join(f"{kind}{p}".ljust(cell) for p in range(len(sim.piece_bytes)))
        out.append(("  " + "".join(c.ljust(widths[k]) for k, c in enumerate(cols))
                    + piece_names).rstrip())
        for r in frame:
            left = r[:1] if step is None else r[:3]
            out.append(("  " + "".join(x.ljust(widths[k]) for k, x in enumerate(left))
                        + "".join(c.ljust(cell) for c in r[3])).rstrip())
    return "\n".join(out + [""] + summary(sim))


def _rows(sim, state, prev, kind, step):
    """[(rank, sends, receives, cells)] for one frame."""
    n, m = sim.n, len(sim.piece_bytes)
    sends, recvs = {r: [] for r in range(n)}, {r: [] for r in range(n)}
    for t in step.transfers if step is not None else []:
        if isinstance(t.src, int):
            sends[t.src].append(f"{_pieces(t.pieces, m, kind)} -> {_holder(t.dst)}")
        if isinstance(t.dst, int):
            recvs[t.dst].append((t.src, t.pieces, t.reduce))
    empty = [None] * m
    rows = []
    for r in range(n):
        now, before = state.get(r, empty), (prev or {}).get(r, empty)
        cells = [cell(now[p], n) + ("*" if prev is not None and now[p] != before[p] else "")
                 for p in range(m)]
        rows.append((f"r{r}", ", ".join(sends[r]) or "-", _receives(recvs[r], m, kind), cells))
    return rows


def _moved(sim, step):
    if step is None:
        return ""
    sizes = [sum(sim.piece_bytes[p] for p in t.pieces) for t in step.transfers]
    each = fmt_bytes(sizes[0]) if min(sizes) == max(sizes) else \
        f"{fmt_bytes(min(sizes))} to {fmt_bytes(max(sizes))}"
    return f"   [{len(sizes)} message{'s' * (len(sizes) > 1)} of {each}]"


def _receives(items, m, kind):
    """'c2 <- r3 add' or 'c0 <- r1 keep'; many sources (one_shot) in one line."""
    if not items:
        return "-"
    if len(items) > 2 and len({p for _, p, _ in items}) == 1:
        first = items[0]
        rest = [_holder(s) for s, _, _ in items[1:]]
        return (f"{_pieces(first[1], m, kind)} <- {_holder(first[0])} "
                f"{'add' if first[2] else 'keep'}, add {rest[0]}..{rest[-1].split()[-1]}")
    return ", ".join(f"{_pieces(p, m, kind)} <- {_holder(s)} {'add' if red else 'keep'}"
                     for s, p, red in items)


def _pieces(pieces, m, kind):
    if len(pieces) == m and m > 1:
        return "all"
    return ",".join(f"{kind}{p}" for p in pieces)


def _holder(h):
    return f"slot {h[1]}" if isinstance(h, tuple) else f"r{h}"


def cell(value, n):
    """A cell of the picture: the ranks whose contribution a chunk holds ("all" for every one)."""
    if value is None:
        return "."
    if len(value) == n and n > 1:
        return "all"
    return ("" if n <= 10 else "+").join(str(r) for r in sorted(value))


def _size_range(sizes):
    lo, hi = min(sizes), max(sizes)
    return fmt_bytes(lo) if lo == hi else f"{fmt_bytes(lo)} to {fmt_bytes(hi)}"


def point_to_point(n, nbytes):
    """explain's words for send/recv, which is not a collective: no schedule to draw."""
    c = send_recv(nbytes)
    text = ("send/recv is point to point, not a collective: one rank's comm.send(x, peer) "
            "meets the peer's comm.recv(out, source), in order per pair of ranks, and nobody "
            "else takes part. One message of S bytes costs one alpha and S through each of the "
            f"two ports: T = alpha + S beta; here S = {fmt_bytes(nbytes)}: {c.describe()}. "
            f"A ring exchange on {n} ranks (each sends to the next and receives from the "
            "previous at once: comm.batch, nccl-tests' sendrecv) costs every rank the same, "
            "since a port sends and receives at once.")
    return "\n".join(textwrap.wrap(text, 100))


def summary(sim):
    """Totals, the checks that passed, the cost model's formula beside the simulation."""
    n, S = sim.n, sim.nbytes
    c = sim.cost
    sent = [sim.sent_bytes.get(r, 0) for r in range(n)]
    busiest = f" (most: r{sent.index(max(sent))})" if min(sent) != max(sent) else ""
    notes = [f"{len(sim.steps)} steps; on the critical path: {c.describe()}.",
             f"Bytes sent per rank: {_size_range(sent)}{busiest}."]
    if collectives.get(sim.coll).reduces:
        counts = ", ".join(str(k) for k in sim.reductions)
        notes.append(f"Reductions per chunk, all ranks together: {counts}. Every rank's input "
                     "is counted exactly once in every result: checked.")
    goal = {"all_reduce": "Every rank holds every chunk, complete",
            "reduce_scatter": "Rank r holds chunk r, complete",
            "all_gather": "Every rank holds every rank's chunk",
            "broadcast": "Every rank holds the root's buffer",
            "reduce": "The root holds every chunk, complete",
            "gather": "The root holds every rank's chunk",
            "scatter": "Rank r holds the root's chunk r",
            "all_to_all": "Rank q holds chunk q of every rank's input"}[sim.coll]
    notes.append(f"{goal}: checked.")
    model = cost(sim.coll, sim.algo, S, n, local_size=sim.local_size,
                 segment=S / len(sim.piece_bytes))
    same = all(abs(a - b) <= 1e-9 * max(1.0, abs(b)) for a, b in
               zip(vars(c).values(), vars(model).values()))
    notes.append(f"dpcore.cost.cost() says {model.describe()}: "
                 + ("the same." if same else "slightly different (uneven pieces)."))
    lines = ["summary"] + [textwrap.fill(x, 100, initial_indent="  ", subsequent_indent="    ")
                           for x in notes]
    lines += ["", "why (dpcore.cost.formulas):"] + \
        ["  " + line for line in derivation(sim.coll, sim.algo).splitlines()]
    if n > 1:
        lines += ["", "Bytes per link over the whole collective (row sends to column):"]
        if sim.algo == "one_shot":
            lines.append("(row q includes the reads of slot q; the diagonal is writing one's "
                         "own slot)")
        w = max(9, max(len(fmt_bytes(b)) for b in sim.link_bytes.values()) + 2)
        lines.append("       " + "".join(f"r{r}".ljust(w) for r in range(n)).rstrip())
        for s in range(n):
            row = [fmt_bytes(sim.link_bytes[(s, d)]) if (s, d) in sim.link_bytes else "."
                   for d in range(n)]
            lines.append((f"  r{s:<4}" + "".join(x.ljust(w) for x in row)).rstrip())
    return lines
