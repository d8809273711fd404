"""The collectives dpcore runs, one row each: what a collective takes and returns, and what it
costs a rank under the ring, one_shot and direct. The table is csrc/include/dpcore/coll_table.h,
read here from _C.COLLECTIVE_TABLE; the ledger, the bench, the cost model and explain take their
numbers from it rather than restating them.

An Amount, for n ranks and a buffer of S bytes (nccl-tests' size: the input of all_reduce and
reduce_scatter, the output of all_gather, the payload of broadcast), is
    whole S + peers (n-1) S + chunks (n-1)/n S
and (n-1)/n S is a chunk (S/n) from or for each peer. Steps and the bus factor are Amounts of 1.

    algo_cost("all_reduce", "ring").steps            # Amount(peers=2): 2(n-1) steps
    bytes_per_rank("all_reduce", "ring", 4, 1 << 20)  # 1572864.0: 2(n-1)/n S
    bus_factor("all_gather", 4)                       # 0.75
"""
from typing import NamedTuple

from . import _C


class Amount(NamedTuple):
    """whole S + peers (n-1) S + chunks (n-1)/n S. of() rounds as the cost model always did (a
    chunk term as k (n-1) times S/n), factor() as the ledger and the bus factor did."""
    whole: int = 0
    peers: int = 0
    chunks: int = 0

    def __add__(self, other):
        return Amount(*(a + b for a, b in zip(self, other)))

    def of(self, n, S):
        """The amount for n ranks and S (1 for steps), counted as the cost model derives it: in
        chunks of S/n; an int where S and the amount are (steps)."""
        whole = self.whole + self.peers * (n - 1)
        total = whole * S if whole else 0
        return total + self.chunks * (n - 1) * (S / n) if self.chunks else total

    def factor(self, n):
        """The amount over S, as a ratio (k (n-1)/n rounded once): the bus factor, and what the
        ledger multiplies a buffer's bytes by. of(n, S) is factor(n) * S up to rounding."""
        whole = self.whole + self.peers * (n - 1)
        return whole + self.chunks * (n - 1) / n if self.chunks else float(whole)


class AlgoCost(NamedTuple):
    """What one algorithm costs a rank, as the cost model charges it: bytes on the critical path
    (the ring's: what each rank sends), bytes reduced, steps; chain: the steps are the hops of a
    chain from the root, pipelined by segments (each segment after the first adds a step)."""
    bytes: Amount
    reduced: Amount
    steps: Amount
    chain: bool


class Collective(NamedTuple):
    name: str
    code: int           # dpcore.dtypes.COLLECTIVES[name]
    reduces: bool       # takes an op
    rooted: bool        # takes a root
    output: str         # the output's count: "same_as_input", "own_shard", "sum_of_shards", "none"
    algorithms: dict    # "ring", "one_shot", "direct" -> AlgoCost: those that run it
    bus_factor: Amount  # nccl-tests' busbw / algbw


def _collective(row):
    algos = {algo: AlgoCost(*map(Amount._make, c[:3]), c[3])
             for algo, c in row["algorithms"].items()}
    return Collective(row["name"], row["code"], row["reduces"], row["rooted"], row["output"],
                      algos, Amount(*row["bus_factor"]))


TABLE = {row["name"]: _collective(row) for row in _C.COLLECTIVE_TABLE}  # in code order
# Those that move data (all but barrier): the ones the cost model, the bench and explain know.
MOVING = tuple(name for name, c in TABLE.items() if c.output != "none")


def get(coll):
    """The row of collective `coll` (a name); ValueError names the known ones otherwise."""
    try:
        return TABLE[coll]
    except KeyError:
        raise ValueError(f"unknown collective {coll!r}; expected one of "
                         f"{', '.join(TABLE)}") from None


def algo_cost(coll, algo):
    """coll's AlgoCost under algo ("ring", "one_shot" or "direct")."""
    return get(coll).algorithms[algo]


def bytes_per_rank(coll, algo, n, nbytes):
    """Bytes on a rank's critical path for coll under algo, n ranks, a buffer of nbytes."""
    return algo_cost(coll, algo).bytes.of(n, nbytes)


def ring_share(coll, n):
    """The share of its buffer each rank sends around the ring: 2(n-1)/n for all_reduce, (n-1)/n
    for the others (the broadcast chain's on average: n-1 links of S over n ranks)."""
    return algo_cost(coll, "ring").bytes.factor(n)


def bus_factor(coll, n):
    """nccl-tests' bus bandwidth over algorithm bandwidth for coll on n ranks."""
    return get(coll).bus_factor.factor(n)
