"""Choosing and connecting a communicator's transport; the transports themselves are C++
(csrc/cpu/shm_transport.h, csrc/mpi/mpi_transport.h, csrc/mpi/hierarchical.h).

    shm      every rank on one node: one shared-memory segment
    mpi      every collective over MPI point-to-point (DPCORE_TRANSPORT=mpi)
    shm+mpi  several nodes (or DPCORE_NODE_SIZE virtual nodes): shared memory inside a node,
             MPI between; all_reduce hierarchically where the nodes are of one size

MPI only bootstraps (names, sizes) and, between nodes, carries bytes; the algorithms and
every reduction are dpcore's own.
"""
from .. import _C
from ..settings import TRANSPORTS, ring_slots
from .segments import fresh_name, map_everywhere
from .mpi_endpoint import endpoint, threaded


def choose(wanted, boot, node):
    """The transport for `wanted` (DPCORE_TRANSPORT) over the ranks of `boot` (a Bootstrap),
    of which those that share memory with this one form `node` (a Group); every rank gets the
    same answer, as every rank knows every rank's node."""
    if wanted not in TRANSPORTS:
        raise ValueError(f"DPCORE_TRANSPORT={wanted!r}: expected auto, shm or mpi")
    one_node = node.size == boot.size
    if wanted == "shm" and not one_node:
        raise ValueError("DPCORE_TRANSPORT=shm, but the ranks do not all share a node")
    if wanted == "mpi":
        return "mpi"
    return "shm" if one_node else "shm+mpi"


class Connection:
    """A transport's backend (dpcore.comm.backend.Backend) and what the Communicator needs to know
    of it: whether direct can run (every rank may read every peer's memory), and the MPI
    communicators it made, to free at close."""

    def __init__(self, backend, direct=False, comms=()):
        self.backend, self.direct, self.comms = backend, direct, list(comms)


def connect(transport, boot, nodes, settings, timeout):
    """The Connection of `transport` (choose's answer) over the ranks of `boot`, in `nodes`
    (the world ranks of each node, this rank's among them)."""
    node = boot.group(next(n for n in nodes if boot.rank in n))
    if transport == "shm":
        shm = _node_segment(node, settings, lambda name, create, size, slots, slot_bytes,
                            one_shot: _C.ShmBackend(name, create, node.rank, size, slots,
                                                    slot_bytes, one_shot, settings.tune, timeout,
                                                    settings.spin_us))
        direct = all(node.allgather(settings.read_peers and shm.can_read_peers(),
                                    "init: can the ranks read each other"))
        shm.set_peer_reads(direct)  # without: exchanges stage through the segment in rounds
        return Connection(shm, direct=direct)
    # Each MPI link gets a communicator of its own, so no message can meet another's receive.
    world = boot.dup(boot.comm, "init: duplicate the communicator for MPI")
    if transport == "mpi":
        return Connection(_C.MpiBackend(endpoint(world, range(boot.size), boot.pids),
                                        *_agreed_mpi_slots(boot, settings), timeout, threaded()),
                          comms=[world])
    return _hierarchical(boot, world, nodes, node, settings, timeout)


def _agreed_mpi_slots(boot, settings):
    """The ring's slots over MPI: rank 0's, since every rank must cut segments alike."""
    return boot.bcast(ring_slots(settings, "mpi"), 0, "init: agree on the MPI slots")


def _hierarchical(boot, world, nodes, node, settings, timeout):
    comms = [world]
    cross_endpoint = None
    # with one rank per node (or one node) the flat algorithms are the hierarchical ones
    if len({len(n) for n in nodes}) == 1 and 1 < node.size < boot.size:
        cross = boot.dup(boot.comm, "init: duplicate the communicator across nodes")
        comms.append(cross)
        cross_endpoint = endpoint(cross, [n[node.rank] for n in nodes], boot.pids)
    mpi_slots = _agreed_mpi_slots(boot, settings)
    backend = _node_segment(node, settings, lambda name, create, size, slots, slot_bytes,
                            one_shot: _C.HierarchicalBackend(
                                name, create, node.rank, size, slots, slot_bytes, one_shot,
                                timeout, endpoint(world, range(boot.size), boot.pids),
                                cross_endpoint, *mpi_slots, threaded(), node.ranks,
                                settings.spin_us))
    return Connection(backend, comms=comms)


def _node_segment(node, settings, make):
    """make(name, create, ranks, fifo slots, slot bytes, one-shot bytes) on every rank of
    `node`, over one segment, in the sizes of local rank 0's settings."""
    config = None
    if node.rank == 0:
        config = (fresh_name()[0], *ring_slots(settings, "shm"), settings.one_shot_bytes)
    name, slots, slot_bytes, one_shot = node.bcast(config, 0, "init: agree on the segment")
    return map_everywhere(node, name, lambda create: make(name, create, node.size, slots,
                                                          slot_bytes, one_shot))
