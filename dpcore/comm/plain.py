"""The plain call: the call of a user's loop (NumPy arrays, the owner's thread), checked and run
in one compiled step (_C.PlainCalls, csrc/bind_plain.cc). Each verb of the Communicator offers
its call to the entry first, and runs its full checks where it answers NotImplemented: the
checks accept the rest and say what is wrong. The entry's tables come from the full checks
themselves, so the two cannot disagree on which dtypes, ops and algorithms a call takes."""
import functools
from typing import Any, Callable, List, Tuple

import numpy as np

from .. import _C
from ..dtypes import ALGORITHMS, COLLECTIVES, DTYPES, OPS, REDUCED
from . import ending
from .choice import NAMES, Rules, choose, reduction
from .work import InFlight, Work

# (coll, x, out, root, op, algo, async_op) -> the result, a Work, or NotImplemented
Entry = Callable[[int, Any, Any, Any, Any, Any, Any], Any]


def plain_calls(backend: _C.Backend, rank: int, size: int, rules: Rules,
                in_flight: InFlight) -> _C.PlainCalls:
    """The host path's plain calls over `backend`. Nothing here holds the Communicator, so the
    entry it keeps makes no cycle."""

    def failed(error: BaseException, x: Any, out: Any) -> None:
        in_flight.orphan(x, out)
        ending.note_failure(error)

    def launched(job: _C.Job, result: Any, x: Any, out: Any) -> Work[Any]:
        in_flight.reap()
        work = Work(job, result, x, out)
        in_flight.add(work)  # keeps the arrays alive even if the caller drops the Work
        return work

    return _C.PlainCalls(backend, rank, size, rules.bands, rules.past_one_shot,
                         rules.one_shot_bytes, _dtypes(), _reductions(), _fixed(rules), failed,
                         launched)


@functools.lru_cache(maxsize=None)  # the process's facts, asked by every communicator
def _dtypes() -> List[Tuple[int, int]]:
    """(NumPy type number, code) of the built-in dtypes dpcore moves, every alias included
    (int64 is both 'l' and 'q')."""
    found = {}
    for char in np.typecodes["All"]:
        dtype = np.dtype(char)
        if dtype in DTYPES and dtype.isnative and dtype.num < _C.PLAIN_TYPE_NUMS:
            found[dtype.num] = DTYPES[dtype]
    return sorted(found.items())


@functools.lru_cache(maxsize=None)
def _reductions() -> List[Tuple[int, int]]:
    """(dtype code, op code) of every reduction the full checks (choice.reduction) allow."""
    allowed = []
    for dtype in [d for d, code in DTYPES.items() if code in REDUCED]:  # the others only move
        for op in OPS:
            try:
                allowed.append(reduction(dtype, op))
            except (TypeError, ValueError):
                pass
    return allowed


def _fixed(rules: Rules) -> List[Tuple[int, int, int]]:
    """(collective, algorithm asked for, algorithm run) of every fixed algorithm choose() takes
    on this path. At 0 bytes: the one size it refuses, past one_shot's limit, the entry checks
    against rules.one_shot_bytes itself."""
    taken = []
    for coll, code in COLLECTIVES.items():
        for name in NAMES:
            if name != "auto":  # the entry's own: the band, or the exchanges' kAuto
                try:
                    taken.append((code, ALGORITHMS[name], choose(name, coll, 0, rules)))
                except ValueError:
                    pass
    return taken
