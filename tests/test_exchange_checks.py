"""gather, scatter and all_to_all's checks that need no peers: which algorithm a rank asks for
(dpcore/comm/choice.py), and all_to_all's splits, checked alone and as a matrix
(dpcore/comm/splits.py). The calls themselves: tests/scripts/exchange.py."""
import numpy as np
import pytest

from dpcore import _C
from dpcore.comm import choice, splits


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
