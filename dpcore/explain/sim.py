"""A schedule runner that tracks whose data every rank holds.

A schedule is a list of steps; a step is a set of transfers that happen at once (every sender
reads what it held before the step). Each piece of the buffer (a chunk, or a segment for the
broadcast chains) is tracked on every rank as the set of ranks whose input it contains: a
reduction adds sets and must never add a rank twice (that would count its contribution twice);
a copy replaces the set. At the end every rank must hold what the collective promises.

The same run counts what the cost model charges: steps that wait on a peer (alpha), the bytes
through the busiest port of each step (beta) and the bytes reduced (gamma).
"""
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

from ..cost.params import Cost


class ScheduleError(AssertionError):
    """The schedule is wrong: it double-counts, sends what it lacks, or ends incomplete."""


@dataclass(frozen=True)
class Transfer:
    src: object          # a rank (int) or a shared slot ("slot", rank)
    dst: object
    pieces: tuple        # piece indices
    reduce: bool         # True: added into what dst holds; False: dst keeps a copy


@dataclass
class Step:
    transfers: list
    phase: str
    sync: bool = True    # waits for a peer (one alpha); a write into one's own slot does not


@dataclass
class Simulation:
    coll: str
    algo: str
    n: int
    piece_bytes: list            # bytes of every piece
    piece_kind: str              # "chunk" or "segment"
    steps: list
    initial: dict                # holder -> [frozenset | None per piece]
    expected: dict               # rank -> [frozenset | None (anything) per piece]
    node_of: object = None       # rank -> node, for hierarchical (inter-node links)
    count: int = 0               # elements in the whole buffer, and their type
    dtype: str = "float32"
    root: int = 0
    local_size: Optional[int] = None  # ranks per node (hierarchical)
    states: list = field(default_factory=list)        # after each step
    reductions: list = field(default_factory=list)    # reduce operations per piece, all ranks
    link_bytes: dict = field(default_factory=dict)    # (src rank, dst rank) -> bytes
    sent_bytes: dict = field(default_factory=dict)    # rank -> bytes it sent
    cost: Optional[Cost] = None

    @property
    def nbytes(self):
        """S, the cost model's buffer: every piece's bytes, but all_to_all's pieces are every
        rank's chunks for every rank (piece p*n + q: p's for q), n times S."""
        total = sum(self.piece_bytes)
        return total // self.n if self.coll == "all_to_all" else total

    def run(self):
        state = {h: list(v) for h, v in self.initial.items()}
        self.reductions = [0] * len(self.piece_bytes)
        links, sent, total = defaultdict(float), defaultdict(float), Cost()
        for i, step in enumerate(self.steps):
            payload = [[self._read(state, t, p, i) for p in t.pieces] for t in step.transfers]
            for t, values in zip(step.transfers, payload):
                held = state.setdefault(t.dst, [None] * len(self.piece_bytes))
                for p, v in zip(t.pieces, values):
                    held[p] = self._combine(held[p], v, t, p, i)
                    self.reductions[p] += t.reduce
                nbytes = sum(self.piece_bytes[p] for p in t.pieces)
                links[(_owner(t.src), _owner(t.dst))] += nbytes
                if isinstance(t.src, int):
                    sent[t.src] += nbytes
            total = total + self._step_cost(step)
            self.states.append({h: list(v) for h, v in state.items()})
        self.link_bytes, self.sent_bytes, self.cost = dict(links), dict(sent), total
        return self

    def _read(self, state, t, p, i):
        value = state.get(t.src, [None] * len(self.piece_bytes))[p]
        if value is None:
            raise ScheduleError(f"step {i}: {_name(t.src)} sends {self.piece_kind} {p} "
                                "that it does not hold")
        return value

    def _combine(self, held, incoming, t, p, i):
        if not t.reduce:
            return incoming
        if held is None:
            raise ScheduleError(f"step {i}: {_name(t.dst)} adds {self.piece_kind} {p} into "
                                "nothing")
        if held & incoming:
            raise ScheduleError(f"step {i}: {_name(t.dst)} counts rank(s) "
                                f"{sorted(held & incoming)} twice in {self.piece_kind} {p}")
        return held | incoming

    def _step_cost(self, step):
        """The step lasts as long as its busiest port; intra- and inter-node links apart."""
        ports = defaultdict(float)    # (rank, "in"/"out", inter?) -> bytes
        reduced = defaultdict(float)
        kinds = set()
        for t in step.transfers:
            nbytes = sum(self.piece_bytes[p] for p in t.pieces)
            inter = self._inter(t)
            kinds.add(inter)
            if isinstance(t.src, int):
                ports[(t.src, "out", inter)] += nbytes
            if isinstance(t.dst, int):
                ports[(t.dst, "in", inter)] += nbytes
                if t.reduce:
                    reduced[t.dst] += nbytes

        def busiest(inter):
            return max((b for (_, _, i), b in ports.items() if i == inter), default=0)

        return Cost(steps=int(step.sync and False in kinds), nbytes=busiest(False),
                    reduced=max(reduced.values(), default=0),
                    inter_steps=int(step.sync and True in kinds), inter_nbytes=busiest(True))

    def _inter(self, t):
        if self.node_of is None or not (isinstance(t.src, int) and isinstance(t.dst, int)):
            return False
        return self.node_of(t.src) != self.node_of(t.dst)

    def check(self):
        """Raise ScheduleError unless every rank ends holding what the collective promises."""
        final = self.states[-1] if self.states else self.initial
        for rank, want in self.expected.items():
            have = final.get(rank, [None] * len(want))
            for p, w in enumerate(want):
                if w is not None and have[p] != w:
                    got = "nothing" if have[p] is None else f"ranks {sorted(have[p])}"
                    raise ScheduleError(f"{self.coll}/{self.algo} n={self.n}: rank {rank} ends "
                                        f"with {got} in {self.piece_kind} {p}, expected ranks "
                                        f"{sorted(w)}")
        return self


def _owner(holder):
    """A slot belongs to its rank: reading slot q is traffic from q's memory."""
    return holder[1] if isinstance(holder, tuple) else holder


def _name(holder):
    return f"slot {holder[1]}" if isinstance(holder, tuple) else f"rank {holder}"
