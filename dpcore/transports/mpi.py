"""MpiTransport: every collective among all ranks over MPI point-to-point (p2p.py), with
dpcore's own schedules and reductions; no MPI_Allreduce, MPI_Bcast or the like.

Every collective starts by exchanging a header (sequence number, collective, dtype, count,
total, op, root, algo) with every rank, so a mismatched call is a CommError on every rank before
any data moves. Collectives run one at a time in the order issued (_Queue); async ones on a
background thread, so they progress while the caller computes. After a failure the transport
refuses further work, as the shared-memory one does: peers may be anywhere in the schedule.
"""
import collections
import threading

import numpy as np
from mpi4py import MPI

from ..dtypes import ALL_GATHER, ALL_REDUCE, AVG, BARRIER, BROADCAST, OPS, REDUCE_SCATTER
from .p2p import (COLL_NAMES, Call, CommError, Link, chain_broadcast, copy, one_shot_all_gather,
                  one_shot_all_reduce, one_shot_reduce_scatter, ring_all_gather, ring_all_reduce,
                  ring_reduce_scatter, tree_broadcast)

ONE_SHOT, RING, COUNTS_ONLY = 0, 1, 2  # algo codes; COUNTS_ONLY: exchange_counts' header only
SEQ, COLL, DTYPE, OP, ROOT, ALGO, COUNT, TOTAL = range(8)  # header fields
_FIELDS = [SEQ, COLL, DTYPE, OP, ROOT, ALGO, COUNT, TOTAL]  # what peers must agree on
_GATHER_FIELDS = _FIELDS[:-2] + [TOTAL]  # all_gather shards may differ in length
_DTYPE_NAMES = {0: "float16", 1: "bfloat16", 2: "float32", 3: "float64", 4: "int8", 5: "uint8",
                6: "int32", 7: "int64"}  # as csrc/include/dpcore/types.h
_OP_NAMES = {code: name for name, code in OPS.items()}
_ALGO_NAMES = ["one_shot", "ring", "counts_only"]


# -- the transport ---------------------------------------------------------------------------

class MpiTransport:
    """All ranks over MPI point-to-point; the raw calls of dpcore._C.ShmComm."""

    def __init__(self, mpi_comm, timeout):
        self.timeout = float(timeout)
        self.rank, self.size = mpi_comm.Get_rank(), mpi_comm.Get_size()
        self._link = Link(mpi_comm, range(self.size))
        self._seq = 0
        self._broken = None
        self._queue = _Queue(threaded=MPI.Query_thread() == MPI.THREAD_MULTIPLE)

    # -- raw calls, as dpcore._C.ShmComm ----------------------------------------------------

    def run(self, coll, dtype, op, root, algo, in_array, out_array, count, total):
        self._queue.run_now(lambda: self._collective(coll, dtype, op, root, algo, in_array,
                                                     out_array, count, total))

    def submit(self, coll, dtype, op, root, algo, in_array, out_array, count, total):
        return self._queue.submit(lambda: self._collective(coll, dtype, op, root, algo,
                                                           in_array, out_array, count, total))

    def exchange_counts(self, dtype, mine):
        headers = self._queue.run_now(lambda: self._collective(
            ALL_GATHER, dtype, 0, 0, COUNTS_ONLY, None, None, mine, 0))
        return [int(c) for c in headers[:, COUNT]]

    def drain(self):
        self._queue.drain()

    def close(self):
        """Finish queued work and stop the background thread (it also ends when idle)."""
        self._queue.close()

    # -- one collective ---------------------------------------------------------------------

    def _collective(self, coll, dtype, op, root, algo, a, out, count, total):
        if self._broken is not None:
            raise CommError("dpcore: communicator unusable after an earlier failure: " +
                            self._broken)
        self._seq += 1
        call = Call(coll, self._seq, self.rank, self.timeout)
        try:
            self._start(call)
            header = np.array([self._seq, coll, dtype, op, root, algo, count, total], np.int64)
            headers = self._link.exchange_headers(header)
            _check_headers(call, headers, header)
            if coll != BARRIER and algo != COUNTS_ONLY:
                self._move(call, coll, dtype, op, root, algo, a.reshape(-1), out.reshape(-1),
                           headers[:, COUNT])
            return headers
        except MPI.Exception as e:  # reported as the collective's failure, on this rank
            error = call.error(f"MPI error: {e}")
            self._broken = str(error)
            raise error from e
        except BaseException as e:  # peers may be mid-collective: nothing further can match
            self._broken = str(e)
            raise

    def _start(self, call):
        self._link.call = call

    def _move(self, call, coll, dtype, op, root, algo, a, out, counts):
        if self.size == 1:  # alone, every collective is a copy (avg divides by 1)
            if coll != BROADCAST:
                copy(a, out)
            return
        if coll == ALL_REDUCE:
            self._all_reduce(call, dtype, op, algo, a, out)
        elif coll == REDUCE_SCATTER:
            f = one_shot_reduce_scatter if algo == ONE_SHOT else ring_reduce_scatter
            f(self._link, dtype, op, a, out, self.size if op == AVG else 0)
        elif coll == ALL_GATHER:
            f = one_shot_all_gather if algo == ONE_SHOT else ring_all_gather
            f(self._link, a, out, [int(c) for c in counts])
        elif coll == BROADCAST:
            (tree_broadcast if algo == ONE_SHOT else chain_broadcast)(self._link, out, root)

    def _all_reduce(self, call, dtype, op, algo, a, out):
        f = one_shot_all_reduce if algo == ONE_SHOT else ring_all_reduce
        f(self._link, dtype, op, a, out, self.size if op == AVG else 0)


def _describe(h):
    coll = int(h[COLL])
    name = COLL_NAMES[coll] if 0 <= coll < len(COLL_NAMES) else f"coll{coll}"
    s = f"{name}(count={h[COUNT]}"
    if coll == ALL_GATHER:
        s += f", total={h[TOTAL]}"
    if coll != BARRIER:
        s += f", dtype={_DTYPE_NAMES.get(int(h[DTYPE]), h[DTYPE])}"
    if coll in (ALL_REDUCE, REDUCE_SCATTER):
        s += f", op={_OP_NAMES.get(int(h[OP]), h[OP])}"
    if coll == BROADCAST:
        s += f", root={h[ROOT]}"
    algo = int(h[ALGO])
    return s + f", algo={_ALGO_NAMES[algo] if 0 <= algo < 3 else algo})"


def _check_headers(call, headers, mine):
    """Every rank sees every header, so every rank raises when any two disagree."""
    fields = _GATHER_FIELDS if mine[COLL] == ALL_GATHER else _FIELDS
    differ = (headers[:, fields] != mine[fields]).any(axis=1)
    if differ.any():
        r = int(differ.argmax())
        raise call.error(f"mismatch: rank {call.rank} called {_describe(mine)} but rank {r} "
                         f"called {_describe(headers[r])}")
    if mine[COLL] == ALL_GATHER and mine[ALGO] != COUNTS_ONLY:
        shards = int(headers[:, COUNT].sum())
        if shards != mine[TOTAL]:
            raise call.error(f"mismatch: the shards add up to {shards} elements but the output "
                             f"holds {mine[TOTAL]}")


# -- running collectives in order ------------------------------------------------------------

class _Job:
    """An async collective: wait(seconds) -> False if time ran out; raises its error."""

    def __init__(self, fn):
        self._fn = fn
        self._done = threading.Event()
        self._error = None
        self.result = None

    def execute(self):
        try:
            self.result = self._fn()
        except BaseException as e:
            self._error = e
        self._fn = None  # drops the arrays
        self._done.set()

    def done(self):
        return self._done.is_set()

    def wait(self, timeout_seconds=-1.0):
        if not self._done.wait(None if timeout_seconds < 0 else timeout_seconds):
            return False
        if self._error is not None:
            raise self._error
        return True


class _Queue:
    """Runs collectives one at a time in the order issued (as csrc/cpu/worker.cc): async ones
    on a background thread, which ends after a while idle; a blocking one on the caller's thread
    when nothing is queued, else behind the queue. Without MPI_THREAD_MULTIPLE everything
    runs on the caller's thread at once."""

    _IDLE_SECONDS = 2.0

    def __init__(self, threaded=True):
        self._threaded = threaded
        self._cv = threading.Condition()
        self._jobs = collections.deque()
        self._busy = False
        self._thread = None

    def submit(self, fn):
        job = _Job(fn)
        if not self._threaded:
            job.execute()
            return job
        with self._cv:
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="dpcore-mpi",
                                                daemon=True)
                self._thread.start()
            self._cv.notify_all()
        return job

    def run_now(self, fn):
        with self._cv:
            idle = not self._busy and not self._jobs
            if idle:
                self._busy = True
        if not idle:
            job = self.submit(fn)
            job.wait()
            return job.result
        try:
            return fn()
        finally:
            with self._cv:
                self._busy = False
                self._cv.notify_all()

    def drain(self):
        with self._cv:
            self._cv.wait_for(lambda: not self._busy and not self._jobs)

    def close(self):
        self.drain()
        with self._cv:
            thread, self._thread = self._thread, None
            self._cv.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _loop(self):
        me = threading.current_thread()
        while True:
            with self._cv:
                ready = self._cv.wait_for(
                    lambda: self._thread is not me or (self._jobs and not self._busy),
                    timeout=self._IDLE_SECONDS)
                if self._thread is not me:  # closed
                    return
                if not ready:
                    if not self._jobs:  # idle: end; the next submit starts a new thread
                        self._thread = None
                        return
                    continue
                job = self._jobs.popleft()
                self._busy = True
            job.execute()
            with self._cv:
                self._busy = False
                self._cv.notify_all()


def __getattr__(name):
    """comm.py imports HierarchicalTransport from here; it lives in hierarchical.py, which
    imports this module, so it is looked up on first use rather than imported at the top."""
    if name == "HierarchicalTransport":
        from .hierarchical import HierarchicalTransport

        return HierarchicalTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
