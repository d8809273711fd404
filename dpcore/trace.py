"""DPCORE_TRACE=FILE.json: a Chrome trace (open it in Perfetto or chrome://tracing) with one lane
per rank, a span per collective (its algorithm, dtype and op in its args) and, below it, a span
per ring step (one verb of one round); and the trainer's forward, backward and step (span()), so
that data parallelism's overlap of communication with backward shows.

Each communicator's backend records in C++ while tracing is on; at exit the ranks gather their
events to rank 0 over MPI, which writes the file.
"""
import atexit
import json
import time
from contextlib import contextmanager

from . import _C, settings
from .dtypes import ALGORITHM_NAMES

_PATH = settings.setting("trace")
_events = []  # (rank, event tuple) from closed communicators
_open = {}  # id(backend) -> (rank, backend): kept alive, so its events survive its communicator
_spans = []  # (name, start_us, duration_us) of this process's compute (span)
_DTYPE_NAMES = {code: name for name, code in _C.DTYPES.items()}
_OP_NAMES = {code: name for name, code in _C.OPS.items()}
_REDUCING = ("all_reduce", "reduce_scatter")


def enabled():
    return bool(_PATH)


def watch(rank, backend):
    """Start recording `backend`'s collectives (dpcore.backend.Backend); `rank` names its lane."""
    backend.enable_trace(True)
    if not _open and not _events:
        atexit.register(_write)
    _open[id(backend)] = (rank, backend)


@contextmanager
def span(name):
    """A span of this rank's training lane (forward, backward, step) while tracing is on."""
    if not _PATH:
        yield
        return
    start = time.time_ns() // 1000  # the wall clock, as the C++ spans' (core/trace.h)
    try:
        yield
    finally:
        _spans.append((name, start, time.time_ns() // 1000 - start))


def collect(backend):
    """Keep what `backend` recorded (when its communicator closes, or at exit)."""
    rank, _ = _open.pop(id(backend), (None, None))
    if rank is not None:
        _events.extend((rank, e) for e in backend.take_trace())


def chrome_events(events, spans=()):
    """Chrome trace events for (lane, (name, start_us, duration_us, seq, step, bytes, algo,
    dtype, op)) pairs from the backends, and (lane, (name, start_us, duration_us)) from span()."""
    out = []
    for lane in sorted({lane for lane, _ in [*events, *spans]}):
        out.append({"name": "process_name", "ph": "M", "pid": lane, "args": {"name": f"rank {lane}"}})
        for tid, what in ((0, "collectives"), (1, "ring steps"), (2, "training")):
            out.append({"name": "thread_name", "ph": "M", "pid": lane, "tid": tid,
                        "args": {"name": what}})
    for lane, (name, start, duration, seq, step, nbytes, algo, dtype, op) in events:
        args = {"seq": seq, "bytes": nbytes}
        if step >= 0:
            args["step"] = step
        if algo >= 0:  # a whole collective
            args.update(algo=ALGORITHM_NAMES[algo], dtype=_DTYPE_NAMES[dtype])
            if name in _REDUCING:
                args["op"] = _OP_NAMES[op]
        out.append({"name": name, "ph": "X", "ts": start, "dur": max(duration, 0), "pid": lane,
                    "tid": 0 if step < 0 else 1, "args": args})
    for lane, (name, start, duration) in spans:
        out.append({"name": name, "ph": "X", "ts": start, "dur": duration, "pid": lane, "tid": 2})
    return out


def _write():
    from mpi4py import MPI

    for _, backend in list(_open.values()):
        collect(backend)
    world = MPI.COMM_WORLD
    mine = [(world.Get_rank(), s) for s in _spans]
    gathered = world.gather((_events, mine), root=0)
    if world.Get_rank() == 0:
        events = [e for rank_events, _ in gathered for e in rank_events]
        spans = [s for _, rank_spans in gathered for s in rank_spans]
        with open(_PATH, "w") as f:
            json.dump({"traceEvents": chrome_events(events, spans), "displayTimeUnit": "ns"}, f)
