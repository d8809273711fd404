"""The tuner behind algo="auto" (csrc/cpu/tuner.h), fed made-up times: it tries both arms, runs
the faster one, keeps checking the other ever more rarely, and follows the machine when the
faster arm changes. Times are seconds per call; nothing here is measured."""
import itertools

from dpcore import _C
from dpcore.dtypes import ALL_GATHER, ALL_REDUCE

MiB = 1 << 20


class Machine:
    """A tuner and a machine on which each arm takes a fixed time per call."""

    def __init__(self, ring, direct):
        self.tuner, self.times, self.picks = _C.Tuner(), {False: ring, True: direct}, []

    def run(self, calls, coll=ALL_REDUCE, nbytes=MiB):
        picks = []
        for _ in range(calls):
            direct = self.tuner.pick_direct(coll, nbytes)
            self.tuner.record(coll, nbytes, direct, self.times[direct])
            picks.append("direct" if direct else "ring")
        self.picks += picks
        return picks


def test_a_run_of_each_then_the_faster():
    m = Machine(ring=2.0, direct=1.0)
    # a run is the switch's call (not counted) and a window of 4 that is
    assert m.run(14) == ["ring"] * 5 + ["direct"] * 9


def test_settled_after_its_settle_calls():
    """dpcore.bench makes TUNER_SETTLE_CALLS untimed calls per row: by then both arms have run,
    and the class runs the faster one."""
    m = Machine(ring=1.0, direct=2.0)
    picks = m.run(_C.TUNER_SETTLE_CALLS + 50)
    assert set(picks[:_C.TUNER_SETTLE_CALLS]) == {"ring", "direct"}
    assert picks[_C.TUNER_SETTLE_CALLS:] == ["ring"] * 50


def test_the_slower_arm_is_retried_ever_more_rarely():
    m = Machine(ring=1.0, direct=3.0)
    picks = m.run(10_000)[10:]
    retries = [i for i in range(1, len(picks)) if picks[i] == "direct" != picks[i - 1]]
    gaps = [b - a for a, b in zip(retries, retries[1:])]
    assert gaps == sorted(gaps) and gaps[0] >= 128 and gaps[-1] <= 2048 + 5
    assert picks.count("direct") / len(picks) < 0.01  # so a 3x slower arm costs < 3 %


def test_it_follows_a_change_of_machine():
    m = Machine(ring=1.0, direct=2.0)
    m.run(4000)
    m.times = {False: 2.0, True: 1.0}  # the host moved the cores: direct wins now
    after = m.run(2000)
    assert "direct" in after[:2100]  # at the next retry at the latest
    switched = after.index("direct")
    assert after[switched + 5:].count("ring") < 0.02 * len(after)
    m.times = {False: 1.0, True: 2.0}  # and back: after 4 slow calls, the ring again
    back = m.run(100)
    assert back[:4] == ["direct"] * 4 and back[4:100] == ["ring"] * 96


def test_a_burst_of_noise_costs_one_period_at_most():
    m = Machine(ring=1.0, direct=3.0)
    m.run(3000)
    m.times = {False: 10.0, True: 30.0}  # a peer descheduled: every call slow for a while
    m.run(6)
    m.times = {False: 1.0, True: 3.0}
    after = m.run(1000)
    wrong = len(list(itertools.takewhile(lambda pick: pick == "direct", after)))
    assert wrong <= 128 and after[wrong:wrong + 128] == ["ring"] * 128


def test_sizes_and_collectives_are_tuned_apart():
    m = Machine(ring=1.0, direct=2.0)
    m.run(100, ALL_REDUCE, MiB)
    # a new size class and a new collective start with their own runs of both arms
    assert m.run(10, ALL_REDUCE, 4 * MiB) == ["ring"] * 5 + ["direct"] * 5
    assert m.run(10, ALL_GATHER, MiB) == ["ring"] * 5 + ["direct"] * 5
    # sizes within a power of two share a class: compared per byte, not per call
    assert m.run(5, ALL_REDUCE, MiB + MiB // 2) == ["ring"] * 5


def test_buffer_kinds_are_tuned_apart():
    """Out of place, direct pays for one more copy than the ring does, and on comm.alloc buffers
    it copies without the kernel: a lead learned on one kind of buffer says nothing about
    another, which starts with runs of its own."""
    tuner = _C.Tuner()
    for _ in range(20):  # out of place the ring leads
        direct = tuner.pick_direct(ALL_GATHER, MiB, in_place=False)
        tuner.record(ALL_GATHER, MiB, direct, 2.0 if direct else 1.0, in_place=False)
    assert not tuner.pick_direct(ALL_GATHER, MiB, in_place=False)
    for kind in ({"in_place": True}, {"shared": True, "in_place": False}):
        picks = []
        for _ in range(10):  # here direct leads
            direct = tuner.pick_direct(ALL_GATHER, MiB, **kind)
            tuner.record(ALL_GATHER, MiB, direct, 1.0 if direct else 2.0, **kind)
            picks.append("direct" if direct else "ring")
        assert picks == ["ring"] * 5 + ["direct"] * 5, kind
