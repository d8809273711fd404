"""gather, scatter and all_to_all's checks that need no peers: which algorithm a rank asks for
(dpcore/comm/choice.py), all_to_all's splits, checked alone and as a matrix
(dpcore/comm/splits.py), and scatter's list on the root (dpcore/comm/pieces.py). The calls
themselves: tests/scripts/exchange.py."""
import numpy as np
import pytest

from dpcore import _C
from dpcore.comm import choice, pieces, splits
from dpcore.comm.host_path import HostPath


def rules(direct=True, one_shot_bytes=1024):
    band = (0, 100)
    return choice.Rules({}, lambda coll, n: band, choice.AUTO if direct else choice.RING,
                        one_shot_bytes, None if direct else "dpcore: no peer reads here")


@pytest.mark.parametrize("coll", sorted(choice.EXCHANGES))
def test_the_algorithms_that_run_an_exchange(coll):
    assert choice.choose("auto", coll, 1 << 20, rules()) == choice.AUTO  # each rank's own pick
    assert choice.choose("one_shot", coll, 1024, rules()) == choice.ONE_SHOT
    assert choice.choose("direct", coll, 1 << 20, rules()) == choice.DIRECT
    with pytest.raises(ValueError, match=f"algo 'ring' does not run {coll}; it runs auto"):
        choice.choose("ring", coll, 8, rules())
    with pytest.raises(ValueError, match="at most 1024 bytes"):
        choice.choose("one_shot", coll, 1025, rules())


def test_without_peer_reads_an_exchange_still_runs_at_any_size():
    """No rank refuses alone what its peers would wait for: a message per transfer (MPI), or
    the inputs staged through the segment in rounds (shared memory): C++ picks, per rank."""
    no_reads = rules(direct=False)
    assert choice.choose("auto", "gather", 1 << 30, no_reads) == choice.AUTO
    assert choice.choose("direct", "scatter", 1 << 30, no_reads) == choice.DIRECT
    with pytest.raises(ValueError, match="no peer reads here"):  # the reductions' direct
        choice.choose("direct", "all_reduce", 8, no_reads)


def test_a_rank_splits_are_checked_where_they_are_passed():
    assert splits.row(None, None, 6, 3).tolist() == [2, 2, 2, -1, -1, -1]
    assert splits.row([0, 5], [1, 1], 5, 2).tolist() == [0, 5, 1, 1]
    for bad, match in [(([1, 2], None, 4, 2), "add up to 3 elements, but x has 4"),
                       (([4], None, 4, 2), "2 counts >= 0"),
                       (([-1, 5], None, 4, 2), "2 counts >= 0"),
                       (([1.5, 2.5], None, 4, 2), "2 counts >= 0"),
                       ((None, [1, 2, 3], 4, 2), "out_splits must be 2 counts"),
                       ((None, None, 5, 2), "x.size / 2 elements .* x has 5")]:
        with pytest.raises(ValueError, match=match):
            splits.row(*bad)


def test_the_matrix_names_every_disagreement_alike():
    rows = [splits.row([1, 2], None, 3, 2), splits.row([3, 0], [2, 0], 3, 2)]
    assert splits.matrix(rows, 2).tolist() == [[1, 2], [3, 0]]
    assert splits.matrix(rows, 2).dtype == np.uint64
    rows[1] = splits.row([3, 0], [2, 5], 3, 2)  # rank 1 expects 5 of its own 0
    with pytest.raises(_C.CommError, match="all_to_all: the ranks' splits disagree: rank 1 "
                                           "sends rank 1 0 elements but rank 1 expects 5"):
        splits.matrix(rows, 2)


def test_scatter_pieces_are_checked_on_the_root():
    """x as a list: one C-contiguous array per rank, of one dtype and size, none overlapping
    out; the table holds their addresses in rank order (dpcore/comm/pieces.py)."""
    out = np.empty(4, np.float32)
    xs = [np.full(4, q, np.float32) for q in range(3)]
    got = pieces.checked(HostPath, xs, out, 3)
    assert got.table.tolist() == [x.ctypes.data for x in xs] and got.table.dtype == np.uint64
    big = np.zeros(12, np.float32)
    for bad, match in [(xs[:2], "one array per rank \\(3\\), not 2"),
                       ([xs[0], xs[1], np.zeros(5, np.float32)], "one dtype and size"),
                       ([xs[0], xs[1], np.zeros(4, np.int32)], "one dtype and size"),
                       ([xs[0], xs[1], big[::3]], "x\\[2\\] must be C-contiguous"),
                       ([xs[0], out, xs[2]], "out overlaps x\\[1\\]"),
                       ([big[:5], big[5:10], np.zeros(5, np.float32)], "out holds 4 elements")]:
        with pytest.raises(ValueError, match=match):
            pieces.checked(HostPath, bad, out, 3)


def test_scatter_pieces_plain_check_takes_only_what_it_can_pass_on_as_it_is():
    """_C.piece_table, the plain call's one step: (the addresses as bytes, the table's own
    address) for exact NumPy arrays that out takes as they are; None otherwise, which sends the
    call to the full checks above (they say what is wrong)."""
    out = np.empty(4, np.float32)
    xs = [np.full(4, q, np.float32) for q in range(3)]
    table, at = _C.piece_table(xs, out, 3)
    assert np.frombuffer(table, np.uint64).tolist() == [x.ctypes.data for x in xs]
    assert at == np.frombuffer(table, np.uint64).ctypes.data
    read_only = out.copy()
    read_only.flags.writeable = False
    for xs_, out_ in [(tuple(xs), out), (xs[:2], out), ([xs[0], xs[1], xs[2][:3]], out),
                      ([xs[0], xs[1], xs[2].astype(np.float64)], out),
                      ([xs[0], out, xs[2]], out), (xs, read_only), (xs, [0.0] * 4)]:
        assert _C.piece_table(xs_, out_, 3) is None
