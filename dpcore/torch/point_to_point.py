"""torch's send, recv and recv from any source on dpcore's isend and irecv, as methods the
process group takes on (process_group.ProcessGroup derives from PointToPoint).

torch makes every point-to-point call async at the backend: dist.send and dist.recv wait on the
Work that isend and irecv return, and batch_isend_irecv issues them one by one on a CPU group.
So each is dpcore's isend or irecv, posted at once (a ring exchange posted in any order does
not deadlock), straight from or into the tensor's memory. dist.recv with no source asks the
Work for the sender (Work._source_rank): the rank dpcore's irecv reports.
"""
from .tensors import as_moved, one
from .work import Pending


class PointToPoint:
    """send, recv and recv_anysource of a process group with self._comm, self._calling()
    and self._completer_thread() (see process_group.py)."""

    def send(self, tensors, dst, tag=0):
        x = as_moved(one(tensors, "send"))
        with self._calling():
            return self._completer_thread().track(
                Pending([self._comm.isend(x, dst, tag=tag)], tensors))

    def recv(self, tensors, src, tag=0):
        return self._received(tensors, src, tag)

    def recv_anysource(self, tensors, tag=0):
        return self._received(tensors, None, tag)

    def _received(self, tensors, src, tag):
        out = as_moved(one(tensors, "recv"))
        with self._calling():
            return self._completer_thread().track(
                Received([self._comm.irecv(out, src, tag=tag)], tensors))


class Received(Pending):
    """An irecv's Work, which knows the rank the message came from once it is done."""

    def _source_rank(self):
        self.finish()
        return self.results[0]
