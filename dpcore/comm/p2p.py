"""Point-to-point: send, recv, their async forms and batch (docs/api.md), checked here once for
host and CUDA arrays and carried by the communicator's engine (csrc/p2p/p2p_engine.h: mailboxes
in shared memory, or MPI; dpcore.setup.p2p_channel). CUDA arrays go through host memory
(host_staging.py).

Bad arguments raise TypeError/ValueError on the calling rank and nothing is sent. A failed op (a
send that met the wrong receive, a timeout, a dead peer) raises CommError; the communicator is
then broken for collectives too, as after a failed collective, and the peers hear it: the two
ranks no longer agree on what was exchanged, and a rank waiting for either in a later collective
would otherwise wait until its timeout."""
from __future__ import annotations

import numbers
from typing import NamedTuple, Optional

import numpy as np

from .. import _C
from ..arrays import Array
from ..dtypes import DTYPES, dtype_code
from .cuda_arrays import device_view
from .host_path import HostPath
from .host_staging import to_device, to_host
from .work import Work

ANY_SOURCE = -1  # csrc/p2p/p2p_op.h kAnySource
_MAX_TAG = (1 << 31) - 1
_MAX_BYTES = _C.P2P_MAX_BYTES


class P2POp(NamedTuple):
    """One op of comm.batch: op "send" or "recv", its array, the peer (a recv's may be None:
    any rank) and the tag, as torch.distributed.P2POp."""

    op: str
    array: Array
    peer: Optional[int]
    tag: int = 0


class P2PWork(Work):
    """The Work of isend (wait() -> None) or irecv (wait() -> the source rank)."""

    def __init__(self, op, finish, on_failure, *keep_alive):
        super().__init__(op, None, *keep_alive)
        self._finish, self._on_failure = finish, on_failure

    def wait(self, timeout=None):
        try:
            super().wait(timeout)
        except _C.CommError as e:
            self._on_failure(e)
            raise
        if self._finish is not None:
            self._result, self._finish = self._finish(), None
        return self._result


class PointToPoint:
    """One communicator's point-to-point side: the checks, the staging, the engine's ops."""

    def __init__(self, engine, rank, size, in_flight, on_failure):
        self._engine, self.rank, self.size = engine, rank, size
        self._in_flight, self._on_failure = in_flight, on_failure

    def send(self, x, peer, tag=0):
        if self._plain(True, x, peer, tag) is None:
            self._blocking("send", x, peer, tag)

    def recv(self, out, peer=None, tag=0):
        source = self._plain(False, out, peer, tag)
        return self._blocking("recv", out, peer, tag) if source is None else source

    def isend(self, x, peer, tag=0):
        return self._start(*self._check("send", x, peer, tag))

    def irecv(self, out, peer=None, tag=0):
        return self._start(*self._check("recv", out, peer, tag))

    def batch(self, ops):
        """Every op checked first, then all posted: none is sent where one is wrong."""
        if not isinstance(ops, (list, tuple)) or not all(isinstance(o, P2POp) for o in ops):
            raise TypeError("dpcore: batch takes a list of dpcore.P2POp(op, array, peer, tag)")
        checked = [self._check(o.op, o.array, o.peer, o.tag) for o in ops]
        return [self._start(*c) for c in checked]

    def close(self):
        """Finishes the pending ops, or fails them at their deadlines; returns the first
        failure's message, or ''."""
        return self._engine.close()

    # -- the checks and the engine's ops ------------------------------------------------------

    def _plain(self, send, array, peer, tag):
        """A user's loop of blocking calls on NumPy arrays, checked and moved in one step of the
        engine's (P2p.blocking): the source (a send's: -1); None where this is not the plain
        case, with nothing posted: the full checks then say what is wrong."""
        if not (type(array) is np.ndarray and type(peer) is int and type(tag) is int
                and 0 <= peer < self.size and peer != self.rank and 0 <= tag <= _MAX_TAG):
            return None
        code = DTYPES.get(array.dtype)
        if code is None:
            return None
        try:
            source = self._engine.blocking(send, peer, tag, code, array)
        except _C.CommError as e:
            self._in_flight.orphan(array)  # a peer may still read or write it
            self._on_failure(e)
            raise
        return None if source == _C.P2P_NOT_PLAIN else source

    def _blocking(self, kind, array, peer, tag):
        send, a, code, copy_in, keep, peer, tag = self._check(kind, array, peer, tag)
        op = self._engine.post(send, peer, tag, code, a, False)
        try:
            op.wait()
        except _C.CommError as e:
            self._in_flight.orphan(a, keep)  # a peer may still read or write them
            self._on_failure(e)
            raise
        if send:
            return None
        if copy_in is not None:
            copy_in()
        return op.source

    def _start(self, send, a, code, copy_in, keep, peer, tag):
        op = self._engine.post(send, peer, tag, code, a, True)
        if send:
            finish = None
        elif copy_in is None:
            finish = lambda: op.source  # noqa: E731
        else:
            finish = lambda: (copy_in(), op.source)[1]  # noqa: E731
        work = P2PWork(op, finish, self._on_failure, a, keep)
        self._in_flight.reap()
        self._in_flight.add(work)  # keeps the arrays alive even if the caller drops the Work
        return work

    def _check(self, kind, array, peer, tag):
        """(send, the host array the engine moves, its dtype code, what to do once a receive is
        done or None, the caller's array to keep alive, peer, tag)."""
        if kind not in ("send", "recv"):
            raise ValueError(f"dpcore: a P2POp's op is 'send' or 'recv', not {kind!r}")
        send = kind == "send"
        peer = self._peer(kind, peer)
        if type(tag) is not int or not 0 <= tag <= _MAX_TAG:
            tag = _tag(kind, tag)
        what = "x" if send else "out"
        if type(array) is np.ndarray:  # the common case, in few steps: it is a small op's cost
            flags, code = array.flags, DTYPES.get(array.dtype)
            if (code is not None and flags.c_contiguous and (send or flags.writeable)
                    and array.nbytes <= _MAX_BYTES):
                return send, array, code, None, array, peer, tag
            a, view = array, None  # the checks below name what is wrong
        else:
            view = device_view(array, what)
            a = HostPath.view(array, what)[0] if view is None else None
        if view is None:
            HostPath.check(a, what)
            code = dtype_code(a.dtype)
            if not send and not a.flags.writeable:
                raise ValueError(f"dpcore: recv writes {what} in place, but {what} is read-only")
            _check_size(a.nbytes)
            return send, a, code, None, array, peer, tag
        if not view.contiguous:
            raise ValueError(f"dpcore: {what} must be C-contiguous (copy it first, as with "
                             f"cupy.ascontiguousarray)")
        code = dtype_code(view.dtype)
        _check_size(view.nbytes)
        if send:
            return send, to_host(view), code, None, view, peer, tag
        if view.readonly:
            raise ValueError(f"dpcore: recv writes {what} in place, but {what} is read-only")
        host = np.empty(view.size, view.dtype)
        return send, host, code, lambda: to_device(view, host), view, peer, tag

    def _peer(self, kind, peer):
        if type(peer) is int and 0 <= peer < self.size and peer != self.rank:
            return peer
        if peer is None and kind == "recv":
            if self.size == 1:
                raise ValueError("dpcore: recv from any rank, but this communicator has no "
                                 "other rank")
            return ANY_SOURCE
        if isinstance(peer, bool) or not isinstance(peer, numbers.Integral) or not (
                0 <= peer < self.size):
            raise ValueError(f"dpcore: {kind} peer {peer!r} is not a rank in [0, {self.size})")
        if peer == self.rank:
            raise ValueError(f"dpcore: {kind} to or from rank {peer} itself (this rank); "
                             f"copy the array instead")
        return int(peer)


def _tag(kind, tag):
    if isinstance(tag, bool) or not isinstance(tag, numbers.Integral) or not (
            0 <= tag <= _MAX_TAG):
        raise ValueError(f"dpcore: {kind} tag {tag!r} is not an int in [0, {_MAX_TAG}]")
    return int(tag)


def _check_size(nbytes):
    if nbytes > _MAX_BYTES:
        raise ValueError(f"dpcore: a message holds at most {_MAX_BYTES} bytes (MPI counts them "
                         f"in an int), not {nbytes}; send it in parts")
