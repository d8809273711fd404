"""DPCORE_TRACE=FILE.json: a Chrome trace (open it in Perfetto or chrome://tracing) with one lane
per rank, a span per collective (its algorithm, dtype and op in its args) and, below it, a span
per ring step (one verb of one round); and the trainer's forward, backward and step (span()), so
that data parallelism's overlap of communication with backward shows.

Each process streams its events to its own file as the run goes (FILE.rank<R>.jsonl, R the rank
of its first traced communicator; dpcore.trace.merge): a communicator's backend appends from C++
when each collective ends (and every _C.TRACE_BATCH events), span() a line per span. So memory
stays bounded, and a process that is killed loses at most its last collective. At a normal exit
the ranks meet, over MPI (COMM_WORLD) or, in a job without MPI, through the store of the first
traced communicator (dpcore.setup.store_wire.trace_gather), and rank 0 merges their files into
FILE.json and removes them. What a crashed job left: `python -m dpcore.trace merge FILE.json`.
"""
import atexit
import sys
import time
from contextlib import contextmanager

from .. import settings
from . import merge

try:
    _PATH = settings.setting("trace")
except ValueError:  # a folder that is not there: dpcore.init() refuses it, naming it
    _PATH = None
_open: dict = {}  # id(backend) -> backend: kept alive, so its last events are flushed at exit
_gather: list = []  # how the ranks meet at exit, where the first communicator was made on a store
_stream: list = []  # (lane, file) of this process: the rank of its first traced communicator


def enabled():
    return bool(_PATH)


def watch(rank, backend, gather=None):
    """Start streaming `backend`'s collectives (dpcore.comm.backend.Backend); `rank` names its
    lane. gather: for a communicator made on a store, gather(items) -> (every rank's items,
    the ranks that sent none) on rank 0, None elsewhere; None: over MPI."""
    if not _stream:
        path = merge.rank_path(_PATH, rank)
        open(path, "w").close()  # a previous run's file of this name is not merged into this
        # appending, as the backends do: each line lands whole at the end, whoever writes it
        _stream.append((rank, open(path, "a", buffering=1)))
        atexit.register(_write)
        if gather is not None:
            _gather.append(gather)
    backend.trace_to(_stream[0][1].name, rank)
    _open[id(backend)] = backend


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
        if _stream:  # a communicator is traced: its rank names the lane
            lane, stream = _stream[0]
            stream.write(merge.line(lane, (name, start, time.time_ns() // 1000 - start)))


def collect(backend):
    """Write out what `backend` still holds (when its communicator closes, or at exit)."""
    if _open.pop(id(backend), None) is not None:
        backend.flush_trace()


def _write():
    for backend in list(_open.values()):
        collect(backend)
    _, stream = _stream[0]
    stream.close()
    gathered = (_gather[0] if _gather else _gather_over_mpi)([stream.name])
    if gathered is None:
        return
    paths, missing = gathered
    merge.write(_PATH, paths, remove=not missing)
    if missing:
        print(f"dpcore: DPCORE_TRACE: {_PATH} lacks ranks {missing}; once their files are "
              f"complete, `python -m dpcore.trace merge {_PATH}` merges every rank's",
              file=sys.stderr)


def _gather_over_mpi(items):
    from mpi4py import MPI

    gathered = MPI.COMM_WORLD.gather(items, root=0)
    return ([i for rank_items in gathered for i in rank_items], []) if gathered else None
