"""DPCORE_TRACE=FILE.json: a Chrome trace (open it in Perfetto or chrome://tracing) with one lane
per rank, a span per collective and, below it, a span per ring step (one verb of one round).

Each communicator's backend records in C++ while tracing is on; at exit the ranks gather their
events to rank 0, which writes the file: over MPI (COMM_WORLD), or, in a job without MPI, through
the store of the first traced communicator (dpcore.store_wire.trace_gather).
"""
import atexit
import json

from . import settings

_PATH = settings.setting("trace")
_events = []  # (rank, event tuple) from closed communicators
_open = {}  # id(backend) -> (rank, backend): kept alive, so its events survive its communicator
_gather = []  # how the events meet at rank 0, where the first communicator was made on a store


def enabled():
    return bool(_PATH)


def watch(rank, backend, gather=None):
    """Start recording `backend`'s collectives (dpcore.backend.Backend); `rank` names its lane.
    gather: for a communicator made on a store, gather(events) -> every rank's events on rank
    0 (None elsewhere); None: over MPI."""
    backend.enable_trace(True)
    if not _open and not _events:
        atexit.register(_write)
        if gather is not None:
            _gather.append(gather)
    _open[id(backend)] = (rank, backend)


def collect(backend):
    """Keep what `backend` recorded (when its communicator closes, or at exit)."""
    rank, _ = _open.pop(id(backend), (None, None))
    if rank is not None:
        _events.extend((rank, e) for e in backend.take_trace())


def chrome_events(events):
    """Chrome trace events for (lane, (name, start_us, duration_us, seq, step, bytes)) pairs."""
    out = []
    for lane in sorted({lane for lane, _ in events}):
        out.append({"name": "process_name", "ph": "M", "pid": lane, "args": {"name": f"rank {lane}"}})
        for tid, what in ((0, "collectives"), (1, "ring steps")):
            out.append({"name": "thread_name", "ph": "M", "pid": lane, "tid": tid,
                        "args": {"name": what}})
    for lane, (name, start, duration, seq, step, nbytes) in events:
        args = {"seq": seq, "bytes": nbytes}
        if step >= 0:
            args["step"] = step
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
