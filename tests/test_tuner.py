"""The tuner behind algo="auto" (csrc/core/tuner.h), fed made-up times: a new class starts on the
fixed choice, tries the other arm once early, takes it over only when it is clearly faster, keeps
checking ever more rarely, gives up a clearly slower trial after one call, follows the machine
when the faster arm changes, and does not flip on noise. Times are seconds per call; nothing here
is measured."""
import itertools

from dpcore import _C
from dpcore.dtypes import ALL_GATHER, ALL_REDUCE, REDUCE

MiB = 1 << 20
RUN = 5  # a run of an arm: the switch's call (not counted), then a window of 4


class Machine:
    """A tuner and a machine on which each arm takes a fixed time per call, or the time that
    noise(i, direct) gives for the i-th call of the class."""

    def __init__(self, ring, direct, noise=None):
        self.tuner, self.times, self.picks = _C.Tuner(), {False: ring, True: direct}, []
        self.noise = noise or (lambda i, direct: None)

    def run(self, calls, coll=ALL_REDUCE, nbytes=MiB, **kind):
        picks = []
        for _ in range(calls):
            direct = self.tuner.pick_direct(coll, nbytes, **kind)
            took = self.noise(len(self.picks) + len(picks), direct) or self.times[direct]
            self.tuner.record(coll, nbytes, direct, took, **kind)
            picks.append("direct" if direct else "ring")
        self.picks += picks
        return picks

    def cost(self, picks):
        """Seconds the calls `picks` took at the machine's fixed times."""
        return sum(self.times[p == "direct"] for p in picks)


def test_a_new_class_starts_on_the_fixed_choice_then_tries_the_other_once():
    m = Machine(ring=1.0, direct=1.2)  # within the margin of each other: no change
    picks = m.run(40)
    assert picks[:RUN] == ["ring"] * RUN  # below FIXED_DIRECT_MIN the ring is the fixed choice
    assert picks[RUN:2 * RUN] == ["direct"] * RUN and picks[2 * RUN:] == ["ring"] * 30
    big = Machine(ring=1.0, direct=1.2)  # from FIXED_DIRECT_MIN it is direct
    assert big.run(RUN + 1, nbytes=_C.FIXED_DIRECT_MIN) == ["direct"] * RUN + ["ring"]
    shared = Machine(ring=1.0, direct=1.2)  # and for all_gather on comm.alloc buffers
    assert shared.run(RUN, ALL_GATHER, shared=True) == ["direct"] * RUN
    reduce = Machine(ring=1.0, direct=1.2)  # but reduce starts on the ring at any size
    assert reduce.run(RUN, REDUCE, nbytes=_C.FIXED_DIRECT_MIN) == ["ring"] * RUN


def test_a_clearly_faster_challenger_takes_over_after_a_confirmation():
    m = Machine(ring=2.0, direct=1.0)
    # the ring's first run, direct's trial, the ring once more (the confirmation), then direct
    assert m.run(25) == ["ring"] * RUN + ["direct"] * RUN + ["ring"] * RUN + ["direct"] * 10


def test_settled_after_its_settle_calls():
    """dpcore.bench makes TUNER_SETTLE_CALLS untimed calls per row: by then a class has tried
    both arms and runs the faster one, whichever it started on."""
    for ring, direct, faster in ((1.0, 2.0, "ring"), (2.0, 1.0, "direct")):
        m = Machine(ring=ring, direct=direct)
        picks = m.run(_C.TUNER_SETTLE_CALLS + 50)
        assert set(picks[:_C.TUNER_SETTLE_CALLS]) == {"ring", "direct"}
        assert picks[_C.TUNER_SETTLE_CALLS:] == [faster] * 50


def test_a_clearly_slower_trial_stops_after_one_counted_call():
    m = Machine(ring=1.0, direct=3.0)
    assert m.run(20) == ["ring"] * RUN + ["direct"] * 2 + ["ring"] * 13


def test_a_plain_loop_pays_little_for_the_trials():
    """A user's loop of 3 warm-up calls and 200 timed: the tuner's trials cost a few calls of
    the slower arm, never more than running the slower arm throughout: 2 % where the fixed
    choice (the ring here) is the faster, 10 % where it is 3x slower."""
    for ring, direct, most in ((1.0, 3.0, 1.02), (1.0, 1.3, 1.02), (3.0, 1.0, 1.1),
                               (1.3, 1.0, 1.02)):
        m = Machine(ring=ring, direct=direct)
        loop = m.run(203)[3:]
        assert m.cost(loop) <= most * min(ring, direct) * len(loop), (ring, direct)


def test_the_slower_arm_is_retried_ever_more_rarely():
    m = Machine(ring=1.0, direct=3.0)
    picks = m.run(10_000)[2 * RUN:]
    retries = [i for i in range(1, len(picks)) if picks[i] == "direct" != picks[i - 1]]
    gaps = [b - a for a, b in zip(retries, retries[1:])]
    assert gaps == sorted(gaps) and gaps[0] >= 128 and gaps[-1] <= 2048 + 2 * RUN
    assert picks.count("direct") / len(picks) < 0.005  # so a 3x slower arm costs < 1 %


def test_it_follows_a_change_of_machine():
    m = Machine(ring=1.0, direct=2.0)
    m.run(4000)
    m.times = {False: 2.0, True: 1.0}  # the host moved the cores: direct wins now
    after = m.run(100)
    # the ring's window sees the slowdown, direct's trial and the ring's confirmation follow
    switched = after.index("direct")
    assert switched <= RUN + 1, after
    assert after[switched:switched + RUN] == ["direct"] * RUN
    assert after[switched + 2 * RUN:] == ["direct"] * (100 - switched - 2 * RUN), after
    m.times = {False: 1.0, True: 2.0}  # and back
    back = m.run(100)
    assert back[-80:] == ["ring"] * 80, back


def test_a_burst_of_noise_does_not_flip_it():
    """Every call of one arm slow for a while (a peer descheduled during the incumbent's
    window, or during the challenger's trial): the class keeps its faster arm."""
    for burst_on in (False, True):  # over the ring's (the incumbent's) calls, over direct's
        def noise(i, direct, burst_on=burst_on):
            return 30.0 if 1000 <= i < 1006 and direct == burst_on else None
        m = Machine(ring=1.0, direct=1.5, noise=noise)
        picks = m.run(2000)
        # direct runs only in trials (a run at most), the ring throughout the rest
        longest = max(len(list(g)) for arm, g in itertools.groupby(picks) if arm == "direct")
        assert longest <= RUN and picks[-1] == "ring", (burst_on, picks[990:1030])


def test_noise_within_the_margin_never_flips_it():
    """Arms within 10 % of each other, each call's time jittering: the class stays on the
    arm it started with (a flip would buy nothing and cost a switch)."""
    jitter = itertools.cycle([1.0, 1.07, 1.03, 1.09, 1.01, 1.05])
    m = Machine(ring=1.0, direct=0.97, noise=lambda i, direct: next(jitter) *
                (0.97 if direct else 1.0))
    picks = m.run(5000)
    flips = sum(1 for a, b in zip(picks, picks[1:]) if a != b)
    assert picks[-1] == "ring" and picks[2 * RUN:].count("direct") < 0.01 * 5000, flips


def test_sizes_and_collectives_are_tuned_apart():
    m = Machine(ring=1.0, direct=2.0)
    m.run(100, ALL_REDUCE, MiB)
    # a new size class and a new collective start with their own first run and trial
    assert m.run(10, ALL_REDUCE, 4 * MiB) == ["ring"] * RUN + ["direct"] * 2 + ["ring"] * 3
    assert m.run(10, ALL_GATHER, MiB) == ["ring"] * RUN + ["direct"] * 2 + ["ring"] * 3
    # sizes within a power of two share a class: compared per byte, not per call
    assert m.run(5, ALL_REDUCE, MiB + MiB // 2) == ["ring"] * 5


def test_buffer_kinds_are_tuned_apart():
    """Out of place, direct pays for one more copy than the ring does, and on comm.alloc buffers
    it copies without the kernel: a lead learned on one kind of buffer says nothing about
    another, which starts with a run of its own."""
    tuner = _C.Tuner()
    for _ in range(20):  # out of place the ring leads
        direct = tuner.pick_direct(ALL_GATHER, MiB, in_place=False)
        tuner.record(ALL_GATHER, MiB, direct, 2.0 if direct else 1.0, in_place=False)
    assert not tuner.pick_direct(ALL_GATHER, MiB, in_place=False)
    for kind, first in (({"in_place": True}, "ring"),
                        ({"shared": True, "in_place": False}, "direct")):
        picks = []
        for _ in range(RUN + 1):  # here direct leads
            direct = tuner.pick_direct(ALL_GATHER, MiB, **kind)
            tuner.record(ALL_GATHER, MiB, direct, 1.0 if direct else 2.0, **kind)
            picks.append("direct" if direct else "ring")
        assert picks[:RUN] == [first] * RUN and picks[RUN] != first, kind
