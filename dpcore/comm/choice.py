"""The argument checks every collective shares, host or device: the reduction's codes, the root,
and which algorithm a call runs (one function, choose, over each path's Rules).

Every rank must run the same algorithm, and the choice travels in the call's header for the peers
to check: choose() decides what this rank can decide alone (one_shot for small calls, inside the
band dpcore.cost.auto derived from the fit), and leaves the rest to C++ (kAuto: rank 0 times the
ring against direct, csrc/core/tuner.h, and its header carries the pick).
"""
import numbers
from typing import Dict, Tuple

import numpy as np

from ..collectives import TABLE
from ..dtypes import ALGORITHMS, AVG, FLOATING, OPS, REDUCED, dtype_code, supported

ONE_SHOT, RING, DIRECT, AUTO = (ALGORITHMS[a] for a in ("one_shot", "ring", "direct", "auto"))
NAMES = ("auto", "one_shot", "ring", "direct")  # what a caller may ask for
# Moved as transfers between ranks (csrc/algo/exchange.h): auto is each rank's own pick in C++,
# by its own input's size (these calls' sizes differ by rank).
EXCHANGES = frozenset(("gather", "scatter", "all_to_all"))

# (dtype, op) -> (dtype code, op code) of the reductions called so far: one lookup on the full
# checks' path (reduction fills it)
REDUCTIONS: Dict[Tuple[np.dtype, str], Tuple[int, int]] = {}


class Rules:
    """What one path's transport can run, for choose().

    bands: {collective: (lo, hi)}, the sizes auto sends to one_shot, read on every call (the
        host's is dpcore.cost.auto's shared dict); fill(coll, nbytes) computes a missing entry.
    past_one_shot: what auto runs past the band (AUTO where direct can run, else RING).
    one_shot_bytes: the most one_shot's slot takes per rank.
    no_direct: why algo "direct" cannot run here, or None where it can (the transport then
        checks the buffers); EXCHANGES run direct everywhere."""

    def __init__(self, bands, fill, past_one_shot, one_shot_bytes, no_direct):
        self.bands, self.fill, self.past_one_shot = bands, fill, past_one_shot
        self.one_shot_bytes, self.no_direct = one_shot_bytes, no_direct


def choose(algo, coll, nbytes, rules):
    """The algorithm code of a call of nbytes (the whole buffer: nccl-tests' size; EXCHANGES:
    this rank's input), for algo "auto", "one_shot", "ring" or "direct"; ValueError says why one
    cannot run."""
    if algo != "auto" and coll in TABLE and algo in NAMES and algo not in TABLE[coll].algorithms:
        raise ValueError(f"dpcore: algo {algo!r} does not run {coll}; it runs "
                         f"{', '.join(['auto', *TABLE[coll].algorithms])}")
    if coll in EXCHANGES:
        return _exchange(algo, coll, nbytes, rules)
    if algo == "auto":
        lo, hi = rules.bands.get(coll) or rules.fill(coll, nbytes)
        return ONE_SHOT if lo <= nbytes <= hi else rules.past_one_shot
    if algo == "ring":
        return RING
    if algo == "one_shot":
        if nbytes > rules.one_shot_bytes:
            raise ValueError(f"dpcore: algo 'one_shot' takes at most {rules.one_shot_bytes} "
                             f"bytes per rank, got {nbytes}")
        return ONE_SHOT
    if algo == "direct":
        if rules.no_direct:
            raise ValueError(rules.no_direct)
        return DIRECT
    raise ValueError(f"dpcore: unknown algo {algo!r}; expected one of {', '.join(NAMES)}")


def _exchange(algo, coll, nbytes, rules):
    # direct runs everywhere: a message per transfer (MPI), reads of the peers' memory, or,
    # where that is refused, the inputs staged through the shared segment in rounds
    if algo == "auto":
        return AUTO
    if algo == "direct":
        return DIRECT
    return choose(algo, None, nbytes, rules)


def reduction(dtype, op):
    """(dtype code, op code), or TypeError / ValueError that says what is wrong."""
    codes = REDUCTIONS.get((dtype, op))
    if codes is not None:
        return codes
    code = dtype_code(dtype)  # raises the full message
    if code not in REDUCED:
        raise TypeError(f"dpcore: {dtype} arrays are moved (broadcast, all_gather, gather, "
                        f"scatter, all_to_all, send, recv), not reduced; dpcore reduces "
                        f"{', '.join(str(d) for d in supported())}")
    opc = OPS.get(op) if isinstance(op, str) else None
    if opc is None:
        raise ValueError(f"dpcore: unknown op {op!r}; expected one of {', '.join(OPS)}")
    if opc == AVG and code not in FLOATING:
        raise TypeError(f"dpcore: op 'avg' needs a floating dtype, not {dtype}")
    REDUCTIONS[(dtype, op)] = code, opc
    return code, opc


def root_rank(root, size, coll="broadcast"):
    """root as an int, or ValueError where it is not a rank."""
    if not isinstance(root, numbers.Integral) or not 0 <= root < size:
        raise ValueError(f"dpcore: {coll} root {root!r} is not a rank in [0, {size})")
    return int(root)
