"""The ring schedule, without MPI: dpcore._C.ring_trace runs the real ring templates
(csrc/algo/ring.h) against a recording transport and returns each rank's verbs as
(verb, start, count) over 1-byte elements. Here every rank's trace is replayed at once, with a FIFO
of two slots from each rank to the next, and symbolic data:

- reductions: element i of rank r holds the unit vector e_r, and reducing adds, so a finished
  element must equal (1, ..., 1): every rank contributed exactly once;
- all_gather and broadcast: an element holds its own index, so it must land where it belongs.

Every message must be received by the next rank, in order, at the offset it was sent from and
with the same length, and no segment may exceed one FIFO slot (segment_count elements).
"""
import random
from collections import deque

import numpy as np
import pytest

import dpcore
from dpcore import _C

SIZES = range(2, 9)  # one rank never runs the ring (the communicator copies instead)
COUNTS = [0, 1, 7, 100, 1000]
SEGMENT_COUNTS = [3, 16]
FIFO_SLOTS = 2  # the fewest a ring needs: a rank holds its input slot while it waits for output

PUSHES = {"send", "recvReduceSend", "recvReduceCopySend", "recvCopySend", "copySend"}
POPS = {"recv", "recvReduceSend", "recvReduceCopySend", "recvReduceCopy", "recvCopySend"}
REDUCES = {"recvReduceSend", "recvReduceCopySend", "recvReduceCopy"}
STORES = {"recv", "recvReduceCopySend", "recvReduceCopy", "recvCopySend", "copySend"}


class Rank:
    """One rank's buffers. `source(start, k)` is what it contributes for elements
    [start, start + k); `store(start, values)` keeps a result."""

    def __init__(self, source, out, out_start=0):
        self.source = source
        self.out = out
        self.out_start = out_start  # reduce_scatter keeps only its shard
        self.writes = np.zeros(len(out), int)

    def store(self, start, values):
        lo = start - self.out_start
        assert 0 <= lo and lo + len(values) <= len(self.out), \
            f"store of [{start}, {start + len(values)}) outside the output"
        self.out[lo:lo + len(values)] = values
        self.writes[lo:lo + len(values)] += 1


def replay(traces, ranks, segment_count, seed=0):
    """Run every rank's trace against FIFOs r -> r+1 of FIFO_SLOTS slots, in a random but
    legal interleaving. Fails on a size or offset mismatch, an oversized segment, a deadlock, or
    a message left over at the end."""
    n = len(traces)
    fifos = [deque() for _ in range(n)]  # fifos[r]: into rank r, from rank r-1
    position = [0] * n
    rng = random.Random(seed)

    def ready(r):
        verb, _, _ = traces[r][position[r]]
        if verb in POPS and not fifos[r]:
            return False
        return verb not in PUSHES or len(fifos[(r + 1) % n]) < FIFO_SLOTS

    def step(r):
        verb, start, k = traces[r][position[r]]
        assert k <= max(segment_count, 1), f"rank {r}: {verb} of {k} > one slot"
        ids = np.arange(start, start + k)
        values = None
        if verb in POPS:
            sent_ids, values = fifos[r].popleft()
            assert len(sent_ids) == k, f"rank {r}: {verb} of {k} got a message of {len(sent_ids)}"
            assert np.array_equal(sent_ids, ids), \
                f"rank {r}: {verb} at {start} got elements from {sent_ids[:1]}"
        if verb in REDUCES:
            values = values + ranks[r].source(start, k)
        elif verb in ("send", "copySend"):
            values = ranks[r].source(start, k)
        if verb in STORES:
            ranks[r].store(start, values)
        if verb in PUSHES:
            fifos[(r + 1) % n].append((ids, values))
        position[r] += 1

    while True:
        pending = [r for r in range(n) if position[r] < len(traces[r])]
        if not pending:
            break
        runnable = [r for r in pending if ready(r)]
        assert runnable, "deadlock: " + ", ".join(
            f"rank {r} at {traces[r][position[r]]}" for r in pending)
        step(rng.choice(runnable))
    assert all(not f for f in fifos), "messages left in a FIFO"


def unit_vectors(rank, n):
    """Rank `rank`'s contribution to any element range: the unit vector e_rank."""
    def source(start, k):
        v = np.zeros((k, n), int)
        v[:, rank] = 1
        return v
    return source


def traces(coll, count, n, segment_count, root=0, counts=()):
    return [_C.ring_trace(coll, count, r, n, segment_count, root=root, counts=list(counts))
            for r in range(n)]


@pytest.mark.parametrize("segment_count", SEGMENT_COUNTS)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("n", SIZES)
def test_all_reduce_reduces_every_element_once_per_rank(n, count, segment_count):
    t = traces("all_reduce", count, n, segment_count)
    ranks = [Rank(unit_vectors(r, n), np.full((count, n), -1)) for r in range(n)]
    replay(t, ranks, segment_count, seed=count * n + segment_count)
    for r, rank in enumerate(ranks):
        assert (rank.out == 1).all(), f"rank {r}: an element is not the sum of all ranks once"
        assert (rank.writes == 1).all(), f"rank {r}: an element written {rank.writes.max()} times"


@pytest.mark.parametrize("segment_count", SEGMENT_COUNTS)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("n", SIZES)
def test_reduce_scatter_leaves_shard_range_on_each_rank(n, count, segment_count):
    t = traces("reduce_scatter", count, n, segment_count)
    ranks = []
    for r in range(n):
        start, stop = dpcore.shard_range(count, n, r)
        ranks.append(Rank(unit_vectors(r, n), np.full((stop - start, n), -1), out_start=start))
    replay(t, ranks, segment_count, seed=count + n)
    for r, rank in enumerate(ranks):
        assert (rank.out == 1).all(), f"rank {r}: its shard is not fully reduced"
        assert (rank.writes == 1).all(), f"rank {r}: a shard element written twice or never"


def uneven_counts(n, count):
    """Shard lengths to gather: shard_range's split, and irregular ones with empty shards."""
    split = [b - a for a, b in (dpcore.shard_range(count, n, r) for r in range(n))]
    rng = random.Random(count * 31 + n)
    irregular = [rng.choice([0, 1, 2, count // n + 3, count]) for _ in range(n)]
    return [split, irregular, [0] * (n - 1) + [count]]


@pytest.mark.parametrize("segment_count", SEGMENT_COUNTS)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("n", SIZES)
def test_all_gather_places_every_shard(n, count, segment_count):
    for counts in uneven_counts(n, count):
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        total = int(starts[-1])
        t = traces("all_gather", 0, n, segment_count, counts=counts)
        ranks = []
        for r in range(n):
            def source(start, k, r=r):
                assert starts[r] <= start and start + k <= starts[r + 1], \
                    f"rank {r} sends [{start}, {start + k}) outside its shard"
                return np.arange(start, start + k)
            ranks.append(Rank(source, np.full(total, -1)))
        replay(t, ranks, segment_count, seed=total)
        for r, rank in enumerate(ranks):
            assert np.array_equal(rank.out, np.arange(total)), \
                f"counts {counts}: rank {r} did not gather every shard in place"
            assert (rank.writes == 1).all(), f"counts {counts}: rank {r} wrote an element twice"


@pytest.mark.parametrize("segment_count", SEGMENT_COUNTS)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("n", SIZES)
def test_broadcast_from_every_root(n, count, segment_count):
    for root in range(n):
        t = traces("broadcast", count, n, segment_count, root=root)
        assert all(v == "send" for v, _, _ in t[root]), "the root only sends"
        ranks = [Rank(lambda start, k: np.arange(start, start + k), np.full(count, -1))
                 for _ in range(n)]
        replay(t, ranks, segment_count, seed=root)
        for r, rank in enumerate(ranks):
            if r != root:
                assert np.array_equal(rank.out, np.arange(count)), f"root {root}: rank {r}"
                assert (rank.writes == 1).all()


@pytest.mark.parametrize("segment_count", SEGMENT_COUNTS)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("n", SIZES)
def test_reduce_to_every_root_in_direct_order(n, count, segment_count):
    # the chain root+1 -> ... -> root: its first rank only sends, the root only keeps, and the
    # FIFOs r -> r+1 then fix the order of operations as direct's (algo/direct.h)
    for root in range(n):
        t = traces("reduce", count, n, segment_count, root=root)
        for r, trace in enumerate(t):
            verb = ("recvReduceCopy" if r == root else "send" if r == (root + 1) % n
                    else "recvReduceSend")
            assert all(v == verb for v, _, _ in trace), (root, r, trace)
        ranks = [Rank(unit_vectors(r, n), np.full((count, n), -1)) for r in range(n)]
        replay(t, ranks, segment_count, seed=root)
        assert (ranks[root].out == 1).all(), f"root {root}: not every rank's data once"
        assert (ranks[root].writes == 1).all()
        assert all((rank.writes == 0).all() for r, rank in enumerate(ranks) if r != root)


@pytest.mark.parametrize("n", SIZES)
def test_all_reduce_sends_2_n_minus_1_over_n_of_the_data(n):
    """Bandwidth optimal: rank r sends every chunk but its own (reduce-scatter steps) and every
    chunk but r+1's (all-gather steps), nothing more."""
    count = 1000
    chunk = [b - a for a, b in (dpcore.shard_range(count, n, c) for c in range(n))]
    for r, trace in enumerate(traces("all_reduce", count, n, 16)):
        sent = sum(k for verb, _, k in trace if verb in PUSHES)
        assert sent == 2 * count - chunk[r] - chunk[(r + 1) % n]


def test_trace_rejects_an_unknown_collective():
    with pytest.raises(ValueError):
        _C.ring_trace("all_to_all", 10, 0, 2, 4)
