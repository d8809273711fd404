"""The memory and traffic ledger: what a rank holds, what it sends and how long it waits for it,
measured, not predicted.

Held bytes are the nbytes of the arrays the engine keeps, each buffer counted once however many
views point into it (a ZeRO-1 gradient chunk is a view into the full gradient buffer; it costs
nothing extra). Sent bytes are counted from the collectives the engine issues, as a ring moves
them (dpcore.collectives.ring_share: each rank sends (N-1)/N of a reduce-scatter's input and of
an all-gather's output, twice that for an all-reduce, and on average (N-1)/N of a broadcast).
The same rule whatever algorithm the communicator picks for small messages, so the totals
compare with the ZeRO paper's 2 psi (stages 0-2) and 3 psi (stage 3) per step. A reduce is a
chain as a broadcast is; gather, scatter and all_to_all have no ring: a rank counts what it
sends in their one schedule of moves (its shard to the root, the root's shards to the others,
its chunks for the other ranks), as send counts its message.
"""
import time

from ..collectives import ring_share
from ..devices import array_module


def root(a):
    """The array that owns a view's memory (itself if it owns it), NumPy's or CuPy's."""
    ndarray = array_module(a).ndarray
    while isinstance(getattr(a, "base", None), ndarray):
        a = a.base
    return a


def held_bytes(arrays):
    """Bytes of the distinct buffers behind `arrays` (None and non-arrays are skipped)."""
    owners = {}
    for a in arrays:
        if a is not None and hasattr(a, "nbytes"):
            r = root(a)
            owners[id(r)] = r.nbytes
    return sum(owners.values())


class CountingComm:
    """A communicator that tallies the bytes this rank sends, per collective, per step, and the
    time the engine spends in wait_all.

    Everything else (rank, size, barrier, close, ...) passes through to the wrapped one."""

    def __init__(self, comm):
        self._comm = comm
        self.sent = {}        # this step so far: collective -> bytes
        self.last_step = {}   # the last finished step
        self.steps = 0
        self.wait_s = 0.0     # since the start: communication that computation did not hide

    def __getattr__(self, name):  # only called for what this class does not define
        return getattr(self._comm, name)

    def _count(self, collective, nbytes):
        """nbytes: the whole buffer (an all-gather's output)."""
        share = ring_share(collective, self._comm.size)
        self.sent[collective] = self.sent.get(collective, 0) + share * nbytes

    def all_reduce(self, x, *args, **kwargs):
        self._count("all_reduce", x.nbytes)
        return self._comm.all_reduce(x, *args, **kwargs)

    def reduce_scatter(self, x, *args, **kwargs):
        self._count("reduce_scatter", x.nbytes)
        return self._comm.reduce_scatter(x, *args, **kwargs)

    def all_gather(self, shard, out=None, *args, **kwargs):
        total = out.nbytes if out is not None else shard.nbytes * self._comm.size
        self._count("all_gather", total)
        return self._comm.all_gather(shard, out, *args, **kwargs)

    def broadcast(self, x, *args, **kwargs):
        self._count("broadcast", x.nbytes)
        return self._comm.broadcast(x, *args, **kwargs)

    def reduce(self, x, *args, **kwargs):
        self._count("reduce", x.nbytes)
        return self._comm.reduce(x, *args, **kwargs)

    def _add(self, name, nbytes):
        self.sent[name] = self.sent.get(name, 0) + nbytes

    def gather(self, s, root=0, *args, **kwargs):
        self._add("gather", 0 if self._comm.rank == root else s.nbytes)
        return self._comm.gather(s, root, *args, **kwargs)

    def scatter(self, x, out, root=0, *args, **kwargs):
        self._add("scatter", x.nbytes - out.nbytes if self._comm.rank == root else 0)
        return self._comm.scatter(x, out, root, *args, **kwargs)

    def all_to_all(self, x, out=None, splits=None, *args, **kwargs):
        n, rank = self._comm.size, self._comm.rank
        own = splits[rank] * x.itemsize if splits is not None else x.nbytes // n
        self._add("all_to_all", x.nbytes - own)
        return self._comm.all_to_all(x, out, splits, *args, **kwargs)

    def send(self, x, *args, **kwargs):
        self._add("send", x.nbytes)
        return self._comm.send(x, *args, **kwargs)

    def wait_all(self, works):
        """Wait for every Work; the time counts as exposed communication."""
        t0 = time.perf_counter()
        for work in works:
            work.wait()
        self.wait_s += time.perf_counter() - t0

    def end_step(self):
        """Close the step's window: last_step is what this rank sent since the previous one
        (at stage 3 that includes the forward's gathers)."""
        self.last_step, self.sent = self.sent, {}
        self.steps += 1

    def reset(self):
        """Forget what was sent so far (construction's broadcast, a checkpoint load)."""
        self.sent = {}


def sent_per_step(comm):
    """Total bytes sent in the last finished step."""
    return sum(comm.last_step.values())


def paper_formulas(psi, ranks, stage, precision="fp32"):
    """The ZeRO paper's bytes per rank (dpcore.cost.memory), and sent bytes per step."""
    from ..cost.memory import comm_per_step, zero_memory

    mem = zero_memory(psi, ranks, stage, precision)
    weight_bytes = 4 if precision == "fp32" else 2
    mem["sent_per_step"] = comm_per_step(psi, ranks, stage, weight_bytes)
    return mem


def formula_text(stage, precision="fp32"):
    """e.g. '4 psi params + 4 psi grads + 8 psi / N optimizer; sends 2 psi x 4 B x (N-1)/N'."""
    from ..cost.memory import PRECISIONS

    (w, g, k), _ = PRECISIONS[precision]
    parts = [(w, "params", stage >= 3), (g, "grads", stage >= 2), (k, "optimizer", stage >= 1)]
    held = " + ".join(f"{b} psi{' / N' if sharded else ''} {name}" for b, name, sharded in parts)
    return f"{held}; sends {3 if stage == 3 else 2} psi x {w} B x (N-1)/N per step"


def report(engine):
    """Lines: this rank's measured ledger beside the paper's formulas."""
    measured = engine.memory()
    psi = engine.flat.count
    precision = "mixed" if engine.mixed_precision else "fp32"
    formula = paper_formulas(psi, engine.comm.size, engine.zero_stage, precision)
    measured["sent_per_step"] = sent_per_step(engine.comm)
    lines = [f"ZeRO stage {engine.zero_stage}, {engine.comm.size} rank(s), psi = {psi} "
             f"parameters, {engine.mixed_precision or 'float32'} ({precision} Adam): bytes on rank "
             f"{engine.comm.rank}",
             f"  paper: {formula_text(engine.zero_stage, precision)}",
             f"  {'':<14}{'measured':>14}{'paper':>14}{'ratio':>8}"]
    for key in ("params", "grads", "optimizer", "total", "sent_per_step"):
        m, f = measured.get(key, 0), formula.get(key, 0)
        ratio = f"{m / f:8.3f}" if f else f"{'-':>8}"
        lines.append(f"  {key:<14}{m:>14,.0f}{f:>14,.0f}{ratio}")
    extra = {k: v for k, v in measured.items() if k not in formula and k != "sent_per_step"}
    for key, value in extra.items():
        lines.append(f"  {key:<14}{value:>14,.0f}{'(not in the paper)':>22}")
    return lines
