"""The two small records of the model: what a collective does (Cost) and what the machine
charges for it (Params).

Cost counts, on the critical path of one rank: messages (each pays alpha), bytes moved (each pays
beta) and bytes reduced (each pays gamma); hierarchical algorithms also count messages and bytes
on the slower between-node link. Time is then a dot product, linear in alpha, beta and gamma,
which is what lets `fit` recover them by least squares.

One bend in the line: a buffer larger than the cache moves at memory speed. Params may give a
cache size and a second beta (beta_mem) for the share of the buffer that misses it (the bend as
measured: benchmarks/results/2026-12-01-cpu.md).
"""
import json
import os
from dataclasses import asdict, astuple, dataclass
from typing import Optional


@dataclass(frozen=True)
class Cost:
    steps: float = 0          # messages on the critical path (each costs alpha)
    nbytes: float = 0         # bytes sent or received through one rank's port (beta each)
    reduced: float = 0        # bytes combined by the reduction op (gamma each)
    inter_steps: float = 0    # the same, on the between-node link (hierarchical only)
    inter_nbytes: float = 0

    def __add__(self, other):
        return Cost(*(a + b for a, b in zip(astuple(self), astuple(other))))

    def describe(self):
        """'6 alpha + 3.15 MB beta + 1.57 MB gamma': the formula with the numbers filled in."""
        from .units import fmt_bytes

        terms = [f"{self.steps:g} alpha", f"{fmt_bytes(self.nbytes)} beta",
                 f"{fmt_bytes(self.reduced)} gamma"]
        if self.inter_steps or self.inter_nbytes:
            terms += [f"{self.inter_steps:g} alpha_inter",
                      f"{fmt_bytes(self.inter_nbytes)} beta_inter"]
        return " + ".join(terms)


@dataclass(frozen=True)
class Params:
    """alpha: seconds per message; beta: seconds per byte moved (1 / link bandwidth);
    gamma: seconds per byte reduced. inter_alpha / inter_beta describe the between-node link
    and default to alpha / beta (one kind of link everywhere). overhead: seconds per call
    whatever its steps (launch, argument checks, the header handshake), NCCL's tuner's "base
    latency"; 0 in the textbook formulas, measured by `fit`. cache_bytes and beta_mem: for a
    buffer of S bytes, the share S / (S + cache_bytes) of its bytes moves at beta_mem instead
    of beta (spill(); None: one speed at every size)."""
    alpha: float
    beta: float
    gamma: float = 0.0
    inter_alpha: Optional[float] = None
    inter_beta: Optional[float] = None
    overhead: float = 0.0
    cache_bytes: Optional[float] = None
    beta_mem: Optional[float] = None

    @classmethod
    def from_rates(cls, latency_us, bandwidth_gbs, reduce_gbs=None, **inter):
        """Params from the numbers people quote: microseconds and GB/s (1 GB = 1e9 B)."""
        gamma = 0.0 if not reduce_gbs else 1 / (reduce_gbs * 1e9)
        return cls(latency_us * 1e-6, 1 / (bandwidth_gbs * 1e9), gamma, **inter)

    def time(self, cost, size=0):
        """Seconds for a Cost: the latency terms plus the bandwidth and reduction terms.
        size: S, the buffer's bytes, which the cache term needs (0: no cache term)."""
        ib = self.beta if self.inter_beta is None else self.inter_beta
        spill = self.spilled(size)
        beta = self.beta if not spill else self.beta * (1 - spill) + self.beta_mem * spill
        return (self.latency(cost) + beta * cost.nbytes + self.gamma * cost.reduced
                + ib * cost.inter_nbytes)

    def spilled(self, size):
        """The share of a buffer of `size` bytes that does not fit in the cache (0 without a
        cache in the model)."""
        return 0.0 if self.beta_mem is None else spill(size, self.cache_bytes)

    def latency(self, cost):
        """The alpha terms (and the per-call overhead): what no bandwidth can buy back."""
        ia = self.alpha if self.inter_alpha is None else self.inter_alpha
        return self.overhead + self.alpha * cost.steps + ia * cost.inter_steps

    def describe(self):
        from .units import fmt_time

        from .units import fmt_bytes

        bw = f"{1 / self.beta / 1e9:.3g} GB/s" if self.beta else "inf"
        if self.beta_mem is not None and self.cache_bytes:
            mem = f"{1 / self.beta_mem / 1e9:.3g} GB/s" if self.beta_mem else "inf"
            bw += f" ({mem} for what misses {fmt_bytes(self.cache_bytes, binary=True)})"
        red = f", reduce {1 / self.gamma / 1e9:.3g} GB/s" if self.gamma else ""
        base = f"overhead {fmt_time(self.overhead)} per call, " if self.overhead else ""
        return f"{base}alpha {fmt_time(self.alpha)}, bandwidth {bw}{red}"


def spill(size, cache_bytes):
    """The share size / (size + cache_bytes) of a buffer's bytes that miss a cache of
    cache_bytes and move at memory speed (0 without a cache): a tenth at a ninth of the cache,
    half at its size, nine tenths at nine times it.

    Not the cliff of one ideal cache, 1 - C/S past S = C: with a private L2, an L3 that may be
    shared or split between the ranks' dies, and prefetchers, a real machine slows gradually, and
    this share follows it closer than the cliff (benchmarks/results/2026-12-01-structure.md)."""
    if not cache_bytes:
        return 0.0
    return size / (size + cache_bytes)


# Illustrative numbers for when nothing was fitted: a few microseconds per message and a
# ~10 GB/s link, the order of magnitude of shared memory or a good NIC.
DEFAULT = Params(alpha=5e-6, beta=1e-10, gamma=2.5e-11)


def default_path():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "dpcore", "cost.json")


def save(path, per_algo, **info):
    """Write {"algorithms": {algo: {alpha, beta, gamma}}, **info} as JSON."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    doc = dict(info, version=1, algorithms={a: _plain(p) for a, p in per_algo.items()})
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def load(path=None):
    """{algo: Params} from a file written by `python -m dpcore.cost fit`; None if absent."""
    path = path or default_path()
    if not os.path.exists(path):
        return None
    with open(path) as f:
        doc = json.load(f)
    return {a: Params(**p) for a, p in doc["algorithms"].items()}


def params_for(params, algo, coll=None):
    """params may be one Params for every algorithm or {algo: Params} as fitted, with
    {"algo/coll": Params} for each collective fitted alone (fit.fit_per_algorithm), which
    predicts that collective best; an algorithm that was not fitted borrows the ring's numbers
    (the most general measurement)."""
    if isinstance(params, Params):
        return params
    for key in ([f"{algo}/{coll}"] if coll else []) + [algo]:
        if key in params:
            return params[key]
    return params.get("ring") or next(iter(params.values()))


def _plain(p):
    return {k: v for k, v in asdict(p).items() if v is not None}


__all__ = ["Cost", "DEFAULT", "Params", "default_path", "load", "params_for", "save", "spill"]
