"""send, recv, isend, irecv and batch: the Communicator's point-to-point calls, mixed into
dpcore.comm.communicator.Communicator. Each checks that the communicator is open and usable
from this thread, then hands the call to its PointToPoint (p2p.py: the checks, the engine)."""
from __future__ import annotations

from typing import List, Optional, Sequence

from ..arrays import Array
from . import ending
from .calls import Calls
from .p2p import P2POp
from .work import Work


class PointToPointCalls(Calls):
    """Mixed into dpcore.comm.communicator.Communicator, which holds self._p2p."""

    def send(self, x: Array, peer: int, tag: int = 0) -> None:
        """Sends x to rank peer; returns once the peer has it (x may be reused)."""
        self._checked_backend()
        self._p2p.send(x, peer, tag)

    def recv(self, out: Array, peer: Optional[int] = None, tag: int = 0) -> int:
        """Receives into out, in place, from rank peer (None: any rank); returns the source."""
        self._checked_backend()
        return self._p2p.recv(out, peer, tag)

    def isend(self, x: Array, peer: int, tag: int = 0) -> Work[None]:
        """send without waiting: a Work whose wait() returns None once the peer has x."""
        self._checked_backend()
        return self._p2p.isend(x, peer, tag)

    def irecv(self, out: Array, peer: Optional[int] = None,
              tag: int = 0) -> Work[int]:
        """recv without waiting: a Work whose wait() returns the source rank."""
        self._checked_backend()
        return self._p2p.irecv(out, peer, tag)

    def batch(self, ops: Sequence[P2POp]) -> List[Work[Optional[int]]]:
        """Issues a list of dpcore.P2POp together; [Work, ...]. A ring exchange (send to the
        next rank, recv from the previous) completes whatever order they are waited in."""
        self._checked_backend()
        return self._p2p.batch(ops)

    def _p2p_failed(self, error: BaseException) -> None:
        """A point-to-point op failed: the collectives refuse too, and the peers hear it."""
        if self._backend is not None:  # else close() has passed it on
            self._backend.pass_on(str(error))
        ending.note_failure(error)
