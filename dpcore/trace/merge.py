"""DPCORE_TRACE's files: each process streams (lane, record) pairs as JSON lines to
FILE.rank<R>.jsonl beside FILE.json, and merging them makes the Chrome trace FILE.json.

A record is a backend's (name, start_us, duration_us, seq, step, bytes, algo, dtype, op), the
last three codes or -1 (csrc/core/trace.h writes these lines), or span()'s (name, start_us,
duration_us). A line cut short by a crash is skipped.
"""
import glob
import json
import os

from .. import _C
from ..collectives import TABLE
from ..dtypes import ALGORITHM_NAMES

_DTYPE_NAMES = {code: name for name, code in _C.DTYPES.items()}
_OP_NAMES = {code: name for name, code in _C.OPS.items()}
_REDUCING = {name for name, c in TABLE.items() if c.reduces}
_SUFFIX = ".jsonl"


def _stem(path):
    return path[:-len(".json")] if path.endswith(".json") else path


def rank_path(path, rank):
    """The file the process whose first traced communicator has `rank` streams to."""
    return f"{_stem(path)}.rank{rank}{_SUFFIX}"


def rank_paths(path):
    """Every rank's file for trace `path` now on disk (what a crashed job left), by rank."""
    stem, found = _stem(path), {}
    for p in glob.glob(glob.escape(stem) + ".rank*" + _SUFFIX):
        rank = p[len(stem) + len(".rank"):-len(_SUFFIX)]
        if rank.isdigit():
            found[int(rank)] = p
    return [found[r] for r in sorted(found)]


def line(lane, record):
    """One streamed line: [lane, *record]."""
    return json.dumps([lane, *record], separators=(",", ":")) + "\n"


def read(paths):
    """The (lane, record) pairs in the files `paths`, in their order."""
    pairs = []
    for p in paths:
        with open(p) as f:
            for text in f:
                try:
                    lane, *record = json.loads(text)
                except ValueError:  # the last line of a killed process, cut short
                    continue
                pairs.append((lane, tuple(record)))
    return pairs


def write(path, paths, remove=True):
    """Merge the rank files `paths` into the Chrome trace `path`; remove them once it is
    written. Returns the number of spans."""
    events = chrome_events(read(paths))
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
    if remove:
        for p in paths:
            os.remove(p)
    return sum(e["ph"] == "X" for e in events)


def chrome_events(events):
    """Chrome trace events for (lane, record) pairs: a lane per rank, with a thread for its
    collectives, one for its ring steps and one for training."""
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
