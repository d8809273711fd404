"""DPCORE_TRACE=FILE.json: a Chrome trace (open it in Perfetto or chrome://tracing) with one lane
per rank, a span per collective (its algorithm, dtype and op in its args) and, below it, a span
per ring step (one verb of one round); and the trainer's forward, backward and step (span()), so
that data parallelism's overlap of communication with backward shows.

Each communicator's backend records in C++ while tracing is on; at exit the ranks gather their
events to rank 0, which writes the file: over MPI (COMM_WORLD), or, in a job without MPI, through
the store of the first traced communicator (dpcore.setup.store_wire.trace_gather).
"""
import atexit
import json
import time
from contextlib import contextmanager

from . import _C, settings
from .collectives import TABLE
from .dtypes import ALGORITHM_NAMES

try:
    _PATH = settings.setting("trace")
except ValueError:  # a folder that is not there: dpcore.init() refuses it, naming it
    _PATH = None
_events: list[tuple[int, tuple]] = []  # (lane, record): closed communicators' events, and span()'s
_open: dict[int, tuple] = {}  # id(backend) -> (rank, backend): kept alive, so its events survive its communicator
_gather: list = []  # how the events meet at rank 0, where the first communicator was made on a store
_lane: list[int] = []  # this process's lane for span(): the rank of its first traced communicator
_DTYPE_NAMES = {code: name for name, code in _C.DTYPES.items()}
_OP_NAMES = {code: name for name, code in _C.OPS.items()}
_REDUCING = {name for name, c in TABLE.items() if c.reduces}


def enabled():
    return bool(_PATH)


def watch(rank, backend, gather=None):
    """Start recording `backend`'s collectives (dpcore.comm.backend.Backend); `rank` names its lane.
    gather: for a communicator made on a store, gather(events) -> every rank's events on rank
    0 (None elsewhere); None: over MPI."""
    backend.enable_trace(True)
    if not _open and not _events:
        atexit.register(_write)
        if gather is not None:
            _gather.append(gather)
    if not _lane:
        _lane.append(rank)
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
        if _lane:  # a communicator is traced: its rank names the lane
            _events.append((_lane[0], (name, start, time.time_ns() // 1000 - start)))


def collect(backend):
    """Keep what `backend` recorded (when its communicator closes, or at exit)."""
    rank, _ = _open.pop(id(backend), (None, None))
    if rank is not None:
        _events.extend((rank, e) for e in backend.take_trace())


def chrome_events(events):
    """Chrome trace events for (lane, record) pairs: a backend's records (name, start_us,
    duration_us, seq, step, bytes, algo, dtype, op), and span()'s (name, start_us,
    duration_us)."""
    out = []
    for lane in sorted({lane for lane, _ in events}):
        out.append({"name": "process_name", "ph": "M", "pid": lane, "args": {"name": f"rank {lane}"}})
        for tid, what in ((0, "collectives"), (1, "ring steps"), (2, "training")):
            out.append({"name": "thread_name", "ph": "M", "pid": lane, "tid": tid,
                        "args": {"name": what}})
    for lane, record in events:
        if len(record) == 3:  # span()'s
            name, start, duration = record
            out.append({"name": name, "ph": "X", "ts": start, "dur": duration, "pid": lane,
                        "tid": 2})
            continue
        name, start, duration, seq, step, nbytes, algo, dtype, op = record
        args = {"seq": seq, "bytes": nbytes}
        if step >= 0:
            args["step"] = step
        if algo >= 0:  # a whole collective
            args.update(algo=ALGORITHM_NAMES[algo], dtype=_DTYPE_NAMES[dtype])
            if name in _REDUCING:
                args["op"] = _OP_NAMES[op]
        out.append({"name": name, "ph": "X", "ts": start, "dur": max(duration, 0), "pid": lane,
                    "tid": 0 if step < 0 else 1, "args": args})
    return out


def _write():
    for _, backend in list(_open.values()):
        collect(backend)
    events = (_gather[0] if _gather else _gather_over_mpi)(_events)
    if events is not None:
        with open(_PATH, "w") as f:
            json.dump({"traceEvents": chrome_events(events), "displayTimeUnit": "ns"}, f)


def _gather_over_mpi(events):
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    gathered = world.gather(events, root=0)
    return [e for rank_events in gathered for e in rank_events] if gathered else None
