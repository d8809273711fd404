"""algo="auto": one_shot or ring, from the fitted crossover, at the cost of a dict lookup.

The choice for a collective on n ranks is a band of sizes [lo, hi] (bytes, as Communicator._algo
sees them) inside which one_shot runs; everything else goes around the ring, or, for the
collectives no ring runs (gather, scatter, all_to_all), direct (beyond()). The band comes
from, in this order:
  1. DPCORE_ONE_SHOT_MAX, when set in the environment: one_shot up to it (the user said so);
  2. the fitted cost model (`python -m dpcore.cost fit`, read by dpcore.cost.load()): one_shot
     where its predicted time beats the ring's (or direct's), i.e. below their crossover;
  3. the built-in default: one_shot up to ONE_SHOT_MAX (4 KiB), or where the ranks of a node
     outnumber its cores, ONE_SHOT_MAX_OVERSUBSCRIBED (default_one_shot_max).
and never past one_shot_limit, the most its shared slot holds. The band is computed once per
(collective, ranks, limit, transport) (about a hundred model predictions) by one_shot_band, a
function of its arguments alone, from what band() gathers: the setting, the model and the
default for these ranks. A Communicator keeps bands() for its (ranks, limit, transport), a
{collective: (lo, hi)} dict, so its hot path is one dict lookup on the collective's name and
two comparisons (see auto_code, which does the same for callers without a dict of their own);
fill() computes a missing entry.

Every rank must choose the same algorithm (the choice is in the header peers check), so every
rank must see the same parameters: Communicator's __init__ can make rank 0's copy everyone's
with agree(). DPCORE_EXPLAIN_AUTO=1 prints the choice and its reason once per (collective,
ranks, power-of-two size class) to stderr.
"""
import json
import math
import os
import sys

from .. import collectives, settings
from ..dtypes import ALGORITHMS
from .choose import crossover, predict
from .params import default_path, load
from .units import fmt_bytes, fmt_time

# Without a fitted cost model, auto switches from one_shot to the ring above this many bytes per
# rank: where the two cross on the development VM with 2 ranks on its 2 cores; with 3 or 4
# ranks sharing them, every ring step waits for a context switch and they cross far later
# (benchmarks/auto_vs_fixed.py; benchmarks/results/2026-12-01-structure.md).
ONE_SHOT_MAX = 4 << 10
ONE_SHOT_MAX_OVERSUBSCRIBED = 128 << 10

EXPLAIN = settings.setting("explain_auto")
_NEVER = (1, 0)                   # an empty band: ring at every size
_BANDS: dict[tuple, tuple] = {}   # (coll, n, one_shot_limit, transport) -> (lo, hi, rule)
_SHARED: dict[tuple, dict] = {}   # (n, one_shot_limit, transport) -> {coll: (lo, hi)}, held by
                                  # callers
_EXPLAINED: set[tuple] = set()    # (coll, n, size class) already printed
_UNSET = object()
_model = _UNSET                   # (params or None, where they came from, transport they were fitted on)


def beyond(coll):
    """What auto weighs one_shot against: the ring, or direct where no ring runs coll."""
    return "ring" if "ring" in collectives.get(coll).algorithms else "direct"


def auto_code(coll, nbytes, n, one_shot_limit, rank=0, transport=None):
    """Communicator's algorithm code: 0 (one_shot), else beyond(coll)'s (ring 1, direct 3)."""
    lo, hi = bands(n, one_shot_limit, transport).get(coll) or \
        fill(coll, nbytes, n, one_shot_limit, rank, transport)
    return 0 if lo <= nbytes <= hi else ALGORITHMS[beyond(coll)]


def bands(n, one_shot_limit, transport=None):
    """The {coll: (lo, hi)} dict for these ranks, limit and transport, for a caller to keep and
    read on its hot path; empty at first (fill() adds entries) and emptied in place when the
    parameters change, so the caller's reference stays valid."""
    return _SHARED.setdefault((n, one_shot_limit, transport), {})


def fill(coll, nbytes, n, one_shot_limit, rank=0, transport=None):
    """(lo, hi) for coll, also stored in bands(). With DPCORE_EXPLAIN_AUTO it is not stored, so
    every call comes back here and rank 0 prints each choice once per size class."""
    lo, hi, _ = band(coll, n, one_shot_limit, transport)
    if EXPLAIN:
        _explain(coll, nbytes, n, one_shot_limit, rank, transport)
    else:
        bands(n, one_shot_limit, transport)[coll] = (lo, hi)
    return lo, hi


def auto_algorithm(coll, nbytes, n, one_shot_limit, transport=None):
    """("one_shot" | "ring" | "direct", reason): what algo="auto" runs for nbytes, and why
    (past the band: beyond(coll))."""
    lo, hi, rule = band(coll, n, one_shot_limit, transport)
    algo = "one_shot" if lo <= nbytes <= hi else beyond(coll)
    return algo, _reason(algo, rule, coll, nbytes, n, one_shot_limit, transport)


def band(coll, n, one_shot_limit, transport=None):
    """(lo, hi, rule): auto runs one_shot for lo <= nbytes <= hi; rule records why (cached)."""
    key = (coll, n, one_shot_limit, transport)
    found = _BANDS.get(key)
    if found is None:
        found = _BANDS[key] = one_shot_band(coll, n, one_shot_limit, transport,
                                            settings.setting("one_shot_max"), model(),
                                            default_one_shot_max(n, transport))
    return found


def model():
    """(params, source, transport): the fitted {algo: Params} auto chooses by (None if there
    are none), where they came from, and the transport they were measured on."""
    global _model
    if _model is _UNSET:
        path = default_path()
        params = load(path)
        fitted_on = _fitted_field(path, "transport") if params else None
        _model = (params, path if params else None, fitted_on)
    return _model


def use_params(params, source="given", transport=None):
    """Choose by these {algo: Params} (None: the default rule) from now on; forgets the cache.
    For the bench's --model, tests, and agree()."""
    global _model
    _model = (params, source if params else None, transport if params else None)
    _clear()


def forget():
    """Reload the fitted parameters on next use (after a new `fit`)."""
    global _model
    _model = _UNSET
    _clear()


def _clear():
    _BANDS.clear()
    _EXPLAINED.clear()
    for held in _SHARED.values():
        held.clear()  # in place: Communicators hold these dicts


def agree(group):
    """Make rank 0's parameters every rank's (a collective over group, a
    dpcore.setup.bootstrap.Group): ranks that read different files, or one that lacks it, would
    otherwise choose differently and fail."""
    if group.rank == 0:
        _note_other_rank_count(group.size)
    use_params(*group.bcast(model() if group.rank == 0 else None, 0,
                            "init: agree on the cost model"))


_NOTED: set[tuple] = set()  # (path, ranks) said once per process


def _note_other_rank_count(n):
    """Say so where auto will choose by a fit made on another number of ranks: the ring's
    alpha and overhead are told apart only at the rank count it was fitted at."""
    params, source, _ = model()
    fitted = _fitted_field(source, "ranks") if params else None
    if fitted is None or fitted == n or (source, n) in _NOTED:
        return
    _NOTED.add((source, n))
    print(f"dpcore: algo='auto' chooses by the cost model in {source}, fitted on {fitted} ranks, "
          f"for {n} ranks; `mpiexec -n {n} python -m dpcore.cost fit` fits this count "
          f"(or delete the file for the built-in rule)", file=sys.stderr, flush=True)


# -- computing the band, once ---------------------------------------------------------------

def default_one_shot_max(n, transport=None):
    """auto's one_shot limit without a fitted model: larger where n ranks of this node
    outnumber the cores it may run on."""
    crowded = transport in (None, "shm") and n > len(os.sched_getaffinity(0))
    return ONE_SHOT_MAX_OVERSUBSCRIBED if crowded else ONE_SHOT_MAX


def one_shot_band(coll, n, limit, transport, forced, fitted, default_max):
    """(lo, hi, rule): auto runs one_shot for lo <= nbytes <= hi, and rule says why; a function
    of its arguments alone. forced: DPCORE_ONE_SHOT_MAX (or None); fitted: model()'s (params,
    source, transport fitted on); default_max: the limit without a usable fit."""
    if forced is not None:
        return 0, min(forced, limit), ("env", forced)
    params, source, fitted_on = fitted
    other = beyond(coll)
    usable = params is not None and {"one_shot", other} <= set(params)
    if usable and transport is not None and fitted_on is not None and fitted_on != transport:
        return 0, min(default_max, limit), ("other_transport", fitted_on, transport)
    if not usable:
        return 0, min(default_max, limit), ("default", None)
    x = crossover(coll, "one_shot", other, n, params)
    one_shot_small = (predict(coll, "one_shot", 1, n, params) <=
                      predict(coll, other, 1, n, params))
    if x is None:
        lo, hi = (0, limit) if one_shot_small else _NEVER
    elif one_shot_small:  # the usual shape: one alpha beats the ring's steps until bytes win
        lo, hi = 0, min(math.ceil(x) - 1, limit)
    else:
        lo, hi = (math.ceil(x), limit) if math.ceil(x) <= limit else _NEVER
    return lo, hi, ("fitted", x, one_shot_small, source)


def _fitted_field(path, field):
    """What the fit in `path` recorded as `field` ("transport", "ranks"), or None."""
    try:
        with open(path) as f:
            return json.load(f).get(field)
    except (OSError, ValueError, TypeError):
        return None


# -- saying why -----------------------------------------------------------------------------

def _reason(algo, rule, coll, nbytes, n, limit, transport):
    size, kib = fmt_bytes(nbytes, binary=True), lambda b: fmt_bytes(b, binary=True)
    other = beyond(coll) if algo == "one_shot" else "one_shot"
    kind = rule[0]
    if algo != "one_shot" and nbytes > limit:
        past = f"{algo}: {size} is past one_shot's {kib(limit)} slot"
        if kind == "fitted" and rule[1] is not None and rule[2] and nbytes >= rule[1]:
            past += f" (and above the fitted crossover at {kib(rule[1])})"
        return past
    if kind == "env":
        side = "<=" if algo == "one_shot" else ">"
        return f"{algo}: {size} {side} DPCORE_ONE_SHOT_MAX={rule[1]} (set in the environment)"
    if kind in ("default", "other_transport"):
        side = "<=" if algo == "one_shot" else ">"
        why = ("no fitted cost model; `mpiexec -n N python -m dpcore.cost fit` makes one"
               if kind == "default" else
               f"the cost model was fitted on transport {rule[1]}, this is {rule[2]}")
        limit_text = kib(default_one_shot_max(n, transport))
        return f"{algo}: {size} {side} {limit_text}, the default switch ({why})"
    _, x, one_shot_small, source = rule
    params = model()[0]
    t = {a: predict(coll, a, nbytes, n, params) for a in ("one_shot", beyond(coll))}
    times = f"{fmt_time(t[algo])} vs {other} {fmt_time(t[other])} predicted"
    where = f"{coll} of {size} on {n} ranks"
    if x is None:
        return f"{algo}: {times} for {where}; {algo} is faster at every size (fitted, {source})"
    below = (algo == "one_shot") == one_shot_small
    return (f"{algo}: {times} for {where}, {'below' if below else 'above'} the fitted "
            f"crossover at {kib(x)} ({source})")


def _explain(coll, nbytes, n, limit, rank, transport):
    key = (coll, n, int(nbytes).bit_length())
    if rank == 0 and key not in _EXPLAINED:
        _EXPLAINED.add(key)
        reason = auto_algorithm(coll, nbytes, n, limit, transport)[1]
        print(f"dpcore auto: {reason}", file=sys.stderr, flush=True)


__all__ = ["ONE_SHOT_MAX", "ONE_SHOT_MAX_OVERSUBSCRIBED", "agree", "auto_algorithm", "auto_code",
           "band", "bands", "beyond", "default_one_shot_max", "fill", "forget", "model",
           "one_shot_band", "use_params"]
