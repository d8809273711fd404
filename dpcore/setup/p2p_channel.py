"""A communicator's point-to-point engine (csrc/p2p/), made at init beside its transport: every
rank takes part in making it (a segment of mailboxes, or an MPI communicator), while later only
the two ranks of a send do.

    shm            a segment of mailboxes, one per ordered pair of ranks (csrc/p2p/shm_mailbox.h)
    mpi, shm+mpi   MPI's own Isend/Irecv, on a duplicate of the communicator

Where the ranks may not read each other's memory (or DPCORE_READ_PEERS=0 says to run as if),
large shared-memory messages are staged through the mailboxes.
"""
from .. import _C
from .mpi_endpoint import endpoint, threaded
from .segments import fresh_name, map_everywhere


def connect(transport, boot, node, timeout, direct):
    """(the _C.P2p of this rank, the MPI communicators it made, to free at close). direct:
    every rank may read every peer's memory, so large messages are read from the sender's
    buffer; else they are staged through the mailboxes."""
    if transport == "shm":
        name = node.bcast(fresh_name()[0] if node.rank == 0 else None, 0,
                          "init: agree on the point-to-point segment")
        return map_everywhere(node, name, lambda create: _C.P2p.shm(
            name, create, node.rank, node.size, direct, timeout)), []
    from mpi4py import MPI

    comm = boot.dup(boot.comm, "init: duplicate the communicator for point-to-point")
    return _C.P2p.mpi(endpoint(comm, range(boot.size), boot.pids), MPI.ANY_SOURCE, timeout,
                      threaded()), [comm]
