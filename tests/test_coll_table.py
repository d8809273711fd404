"""The table of collectives (csrc/include/dpcore/coll_table.h, read by dpcore.collectives) against
what the algorithms really move, and every Python consumer against the table.

The ring's bytes are counted from the verbs csrc/algo/ring.h runs (_C.ring_trace, one byte per
element): summed over the ranks, what is sent and what is reduced must be n times the table's
amount per rank, exactly, for every collective the ring runs, at 2..5 ranks (one rank runs no ring)
and counts that do not split evenly. One-shot and direct are counted by dpcore.explain's schedules.
An algorithm that does not run a collective is absent from its row, not zero.
"""
from fractions import Fraction

import pytest

from dpcore import _C, collectives, dtypes
from dpcore.bench import collectives as bench
from dpcore.bench.floor import floor_bytes
from dpcore.collectives import MOVING, TABLE, Amount, algo_cost, bus_factor, ring_share
from dpcore.cost import formulas
from dpcore.cost.memory import comm_per_step
from dpcore.explain import schedules, simulate
from dpcore.parallel.ledger import CountingComm

RINGED = tuple(c for c in MOVING if "ring" in TABLE[c].algorithms)
RUNS = [(c, a) for c in MOVING for a in TABLE[c].algorithms]
SENDS = {"send", "recvReduceSend", "recvReduceCopySend", "recvCopySend", "copySend"}
COUNTS = (0, 1, 2, 7, 100, 1001, 4099)
RANKS = range(2, 6)


def exact(amount, n, S):
    """The amount as an exact fraction: whole S + peers (n-1) S + chunks (n-1)/n S."""
    return (amount.whole + amount.peers * (n - 1) + Fraction(amount.chunks * (n - 1), n)) * S


def ring_calls(coll, count, n):
    """(S, one_round, even, [(sent, reduced, sends) per rank]) for every way to call coll:
    all_gather with even and uneven shards, broadcast from every root, in one round (a segment
    as large as S) and in several; even: every chunk the same size."""
    if TABLE[coll].output == "sum_of_shards":  # all_gather
        shardings = [[count] * n, [count + r % 3 for r in range(n)], [0] * (n - 1) + [count]]
    else:
        shardings = [()]
    for shards in shardings:
        S = sum(shards) if shards else count
        even = len(set(shards)) == 1 if shards else count % n == 0
        for segment_count in (3, max(S, 1)):
            for root in range(n) if TABLE[coll].rooted else [0]:
                traces = [_C.ring_trace(coll, count, r, n, segment_count, root, list(shards))
                          for r in range(n)]
                yield S, segment_count >= S, even, [_counted(t) for t in traces]


def _counted(trace):
    sent = sum(k for verb, _, k in trace if verb in SENDS)
    reduced = sum(k for verb, _, k in trace if "Reduce" in verb)
    return sent, reduced, sum(verb in SENDS for verb, _, _ in trace)


@pytest.mark.parametrize("coll", RINGED)
def test_the_ring_moves_and_reduces_what_the_table_says(coll):
    ring = algo_cost(coll, "ring")
    for n in RANKS:
        for count in COUNTS:
            for S, one_round, even, ranks in ring_calls(coll, count, n):
                where = f"{coll} n={n} S={S} one round: {one_round}"
                assert sum(s for s, _, _ in ranks) == n * exact(ring.bytes, n, S), where
                assert sum(d for _, d, _ in ranks) == n * exact(ring.reduced, n, S), where
                if even and not ring.chain:  # every rank alike
                    assert all(s == exact(ring.bytes, n, S) for s, _, _ in ranks), where
                if one_round and S:  # the verbs that send are the steps
                    sends = [k for _, _, k in ranks]
                    hops = sum(sends) if ring.chain else max(sends)
                    assert hops == ring.steps.of(n, 1), where


@pytest.mark.parametrize("coll", RINGED)
def test_alone_the_ring_moves_nothing(coll):
    # one rank never runs the ring (core/collectives.h copies its input alone)
    ring = algo_cost(coll, "ring")
    assert ring.bytes.of(1, 1000) == ring.reduced.of(1, 1000) == ring.steps.of(1, 1) == 0


@pytest.mark.parametrize("coll", RINGED)
def test_the_chain_takes_a_step_per_extra_segment(coll):
    ring = algo_cost(coll, "ring")
    for n in RANKS:
        for segments in (1, 2, 5):
            steps = schedules.ring_from_trace(coll, n, 0, segments)
            extra = segments - 1 if ring.chain else 0
            assert len(steps) == ring.steps.of(n, 1) + extra, (coll, n, segments)


@pytest.mark.parametrize("coll, algo", RUNS)
def test_explains_schedules_cost_what_the_table_says(coll, algo):
    # dpcore.explain counts each step's busiest port from its own schedules (the ring's from
    # ring_trace); 840 elements per rank split evenly for every n here
    counts = algo_cost(coll, algo)
    for n in range(2, 7):
        for root in range(n) if TABLE[coll].rooted else [0]:
            segments = 1 if counts.chain else None  # the chain's pipelining is the cost model's
            sim = simulate(coll, algo, n, count=840 * n, segments=segments, root=root)
            S, where = 840 * n * 4, (n, root)
            assert sim.nbytes == S
            assert sim.cost.steps == counts.steps.of(n, 1), (where, "steps")
            # a chain's critical path carries (and a reducing one reduces) S on every hop
            hops = counts.steps.of(n, 1) * S
            assert sim.cost.nbytes == pytest.approx(hops if counts.chain
                                                    else counts.bytes.of(n, S)), (where, "bytes")
            assert sim.cost.reduced == pytest.approx(
                hops if counts.chain and TABLE[coll].reduces else counts.reduced.of(n, S)), \
                (where, "reduced")
            assert (sim.piece_kind == "segment") == counts.chain
            if counts.chain:  # the table's bytes and reductions: the mean over the ranks
                assert sum(sim.sent_bytes.values()) == pytest.approx(n * counts.bytes.of(n, S))
                assert sum(sim.reductions) * S == pytest.approx(n * counts.reduced.of(n, S))


def test_the_algorithms_that_do_not_run_a_collective_are_absent():
    assert {c: tuple(TABLE[c].algorithms) for c in MOVING if len(TABLE[c].algorithms) < 3} == \
        {"gather": ("one_shot", "direct"), "scatter": ("one_shot", "direct"),
         "all_to_all": ("one_shot", "direct")}
    for coll in ("gather", "scatter", "all_to_all"):
        for refuse in (lambda: formulas.cost(coll, "ring", 1000, 4),
                       lambda: simulate(coll, "ring", 4), lambda: ring_share(coll, 4)):
            with pytest.raises((ValueError, KeyError), match="ring"):
                refuse()


def test_the_bus_factor_is_the_busiest_ring_rank_over_S():
    # nccl-tests' busbw: the bytes through the busiest link, over S (broadcast: S on every link)
    for coll in RINGED:
        for n in RANKS:
            for S, _, even, ranks in ring_calls(coll, 12 * n, n):
                if even:
                    busiest = max(s for s, _, _ in ranks)
                    assert bus_factor(coll, n) == pytest.approx(busiest / S), (coll, n)


def test_the_bus_factor_of_a_collective_without_a_ring_is_its_busiest_port_over_S():
    # gather, scatter, all_to_all: the root's port (every rank's, all_to_all) under direct
    for coll in MOVING:
        if "ring" not in TABLE[coll].algorithms:
            for n in RANKS:
                sim = simulate(coll, "direct", n, count=12 * n)
                assert bus_factor(coll, n) == pytest.approx(sim.cost.nbytes / sim.nbytes)


def test_the_table_is_the_codes_and_names_of_types_h():
    assert [c.code for c in TABLE.values()] == list(range(len(TABLE)))
    assert dtypes.COLLECTIVES == {name: c.code for name, c in TABLE.items()}
    for name, c in TABLE.items():
        assert getattr(dtypes, name.upper()) == c.code
    assert MOVING == formulas.COLLECTIVES == tuple(bench.COLLECTIVES)
    barrier = TABLE["barrier"]
    assert barrier.output == "none" and barrier.bus_factor == Amount()
    assert all(counts[:3] == (Amount(),) * 3 for counts in barrier.algorithms.values())
    with pytest.raises(ValueError, match="unknown collective 'alltoall'"):
        collectives.get("alltoall")


def test_the_ring_counts_in_chunks():
    # the ring's amounts are (n-1)/n S multiples, which floor_bytes reads as R and D
    for coll in RINGED:
        ring = algo_cost(coll, "ring")
        assert ring.bytes == Amount(chunks=ring.bytes.chunks)
        assert ring.reduced == Amount(chunks=ring.reduced.chunks)


@pytest.mark.parametrize("n", range(1, 9))
def test_every_consumer_reads_the_table(n):
    S = 3 * 1001 * 64
    for coll in MOVING:
        row = TABLE[coll]
        hooks = bench.COLLECTIVES[coll]
        assert (hooks.reduces, hooks.rooted) == (row.reduces, row.rooted)
        assert hooks.bus_factor(n) == bus_factor(coll, n)
        send, recv, _ = hooks.sizes(1000, n)
        per_rank = 1000 // n
        assert {"same_as_input": (send, recv) == ((per_rank * n,) * 2 if coll == "all_to_all"
                                                  else (1000, 1000)),
                "own_shard": (send, recv) == (per_rank * n, per_rank),
                "sum_of_shards": (send, recv) == (per_rank, per_rank * n)}[row.output]
        for algo, counts in row.algorithms.items():
            got = formulas.cost(coll, algo, S, n, segment=S)  # the chains: one segment
            hops = counts.steps.of(n, 1) * S if n > 1 else 0
            assert got.steps == (counts.steps.of(n, 1) if n > 1 else 0), (coll, algo)
            assert got.nbytes == pytest.approx(
                0 if n == 1 else hops if counts.chain else counts.bytes.of(n, S)), (coll, algo)
            assert got.reduced == pytest.approx(
                0 if n == 1 else hops if counts.chain and row.reduces
                else counts.reduced.of(n, S)), (coll, algo)
        if coll in RINGED:
            ring = algo_cost(coll, "ring")
            mean_sent, mean_reduced = exact(ring.bytes, n, S), exact(ring.reduced, n, S)
        else:  # direct's, whose amounts are the busiest rank's: the root's, if there is one
            direct = algo_cost(coll, "direct")
            mean_sent = exact(direct.bytes, n, S) / (n if row.rooted else 1)
            mean_reduced = exact(direct.reduced, n, S)
        assert floor_bytes(coll, n, S) == round(mean_sent + mean_reduced / 2)
    assert _ledger(n, S) == pytest.approx({c: float(exact(algo_cost(c, "ring").bytes, n, S))
                                           for c in RINGED})
    for stage in range(4):
        calls = ["reduce_scatter", "all_gather"] + ["all_gather"] * (stage == 3)
        want = sum(exact(algo_cost(c, "ring").bytes, n, 1000) for c in calls) * 2
        assert comm_per_step(1000, n, stage, 2) == pytest.approx(float(want))


def test_the_ledger_counts_what_a_rank_sends_where_there_is_no_ring():
    import numpy as np

    class Comm:
        size, rank = 4, 1

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    comm = CountingComm(Comm())
    x = np.zeros(100, np.float32)
    comm.gather(x, root=1)           # the root sends nothing
    comm.gather(x, root=0)           # 400 B to the root
    comm.scatter(x, x[:25], root=1)  # the root keeps its 100 B
    comm.all_to_all(x)               # all but its own quarter
    comm.all_to_all(x, splits=[10, 60, 20, 10])
    comm.send(x[:5], 0)
    assert comm.sent == {"gather": 400, "scatter": 300, "all_to_all": 300 + 160, "send": 20}


def _ledger(n, S):
    class Comm:
        size = n

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    class Buffer:
        nbytes = S

    comm = CountingComm(Comm())
    for coll in RINGED:
        getattr(comm, coll)(Buffer, Buffer)  # all_gather's out: the whole buffer
    return comm.sent


def test_ring_share_is_the_rings_bytes_over_S():
    for coll in RINGED:
        ring = algo_cost(coll, "ring")
        for n in range(1, 9):
            assert ring_share(coll, n) == pytest.approx(float(exact(ring.bytes, n, 1)))
