"""Bootstrap's messages over an MPI communicator (dpcore.init() under mpiexec or srun).

Nonblocking point to point only (isend, improbe), so that the bootstrap can poll every step
against its deadline: a blocking MPI call would wait forever for a rank that died.

First on the caller's communicator, under tags its own messages are unlikely to use: the pids
(the "hello"), and a rank's failure before dpcore's duplicate exists. Then, on the duplicate
(settle), a rank's failure under a tag of its own and each step under its number, wrapped into
the tags an MPI library must have (up to 32767).
"""
import time

from .bootstrap import launcher_pids
from .mpi_comms import made

_HELLO_TAG = 32766
_HELLO_ABORT_TAG = 32765
_begun: dict[int, int] = {}  # MPI handle of a caller's communicator: communicators begun on it
_ABORT_TAG = 1
_FIRST_TAG = 2
_LAST_TAG = 32767


class MpiWire:
    """Messages among the ranks of `mpi_comm`, each carrying `mark`: a message with another one
    is dropped, as one left over from an earlier communicator (a failed one's; or on a
    communicator MPI made later with a context it reused). The mark starts as the count of
    communicators begun on mpi_comm (the same count on every rank: they begin them in one
    order), so that a later dpcore.init never takes an old one; the bootstrap then sets rank 0's
    random one."""

    def __init__(self, mpi_comm):
        from mpi4py import MPI

        self.comm, self._own_comm = mpi_comm, False
        self.rank, self.size = mpi_comm.Get_rank(), mpi_comm.Get_size()
        self._sends = []  # requests of our messages, kept until done
        key = MPI._handleof(mpi_comm)
        _begun[key] = _begun.get(key, 0) + 1
        self.mark = f"generation {_begun[key]}"

    def pids(self):
        """launcher_pids() by rank in this communicator: the peers to watch before the hello."""
        from mpi4py import MPI

        pids = launcher_pids()
        if not pids:
            return [0] * self.size
        group, world = self.comm.Get_group(), MPI.COMM_WORLD.Get_group()
        try:
            ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
        finally:
            group.Free()
            world.Free()
        return [pids.get(r, 0) for r in ranks]

    def watch(self, pids):
        """Nothing to learn before the hello beyond the launcher's pids (pids())."""
        return ""

    def settle(self, boot):
        """After the hello: a duplicate of the caller's communicator, on which every later
        message goes, so that none can meet a receive of the caller's."""
        comm = self.dup(boot, self.comm, "init: duplicate the communicator")
        self.comm, self._own_comm = comm, True

    def dup(self, boot, mpi_comm, what):
        """A duplicate of mpi_comm, made in a step of `boot` (every rank of it calls this)."""
        comm, request = made(mpi_comm.Idup, "Idup")
        boot.wait_until(request.Test, what)
        return comm

    def send(self, obj, peers, tag):
        """obj to each rank in `peers`, under `tag`: "hello", "abort" or a step's number."""
        self._sends = [r for r in self._sends if not r.Test()]
        self._sends += [self.comm.isend((self.mark, obj), dest=r, tag=self._tag(tag))
                        for r in peers]

    def take(self, source, tag):
        """[what came from `source` (any, if None) under `tag` with this wire's mark]."""
        from mpi4py import MPI

        taken = []
        source = MPI.ANY_SOURCE if source is None else source
        while (message := self.comm.improbe(source=source, tag=self._tag(tag))) is not None:
            mark, obj = message.recv()
            if mark == self.mark:
                taken.append(obj)
        return taken

    def all_sent(self, sources, tag):
        return True  # take() itself only looks (improbe), at no cost to the peers

    def flush(self, seconds):
        """Push our messages out for up to `seconds`: MPI may move one only while it is polled."""
        until = time.monotonic() + seconds
        while self._sends and time.monotonic() < until:
            self._sends = [r for r in self._sends if not r.Test()]

    def _tag(self, tag):
        if tag == "hello":
            return _HELLO_TAG
        if tag == "abort":
            return _ABORT_TAG if self._own_comm else _HELLO_ABORT_TAG
        return _FIRST_TAG + (tag - 1) % (_LAST_TAG - _FIRST_TAG)
