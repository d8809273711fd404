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
from ..shared_memory import fresh_name, map_everywhere
from .mpi import endpoint, threaded


def choose(wanted, world, node):
    """The transport for `wanted` (DPCORE_TRANSPORT) over `world`, whose ranks that share
    memory form `node`; every rank gets the same answer."""
    from mpi4py import MPI

    if wanted not in TRANSPORTS:
        raise ValueError(f"DPCORE_TRANSPORT={wanted!r}: expected auto, shm or mpi")
    one_node = world.allreduce(node.Get_size() == world.Get_size(), op=MPI.LAND)
    if wanted == "shm" and not one_node:
        raise ValueError("DPCORE_TRANSPORT=shm, but the ranks do not all share a node")
    if wanted == "mpi":
        return "mpi"
    return "shm" if one_node else "shm+mpi"


class Connection:
    """A transport's backend (dpcore.backend.Backend) and what the Communicator needs to know
    of it: whether direct can run (every rank may read every peer's memory), and the MPI
    communicators it made, to free at close."""

    def __init__(self, backend, direct=False, comms=()):
        self.backend, self.direct, self.comms = backend, direct, list(comms)


def connect(transport, world, node, settings, timeout):
    """The Connection of `transport` (choose's answer) over `world` and `node`."""
    from mpi4py import MPI

    if transport == "shm":
        shm = _node_segment(node, settings, lambda name, create, size, slots, slot_bytes,
                            one_shot: _C.ShmBackend(name, create, node.Get_rank(), size, slots,
                                                    slot_bytes, one_shot, settings.tune, timeout))
        return Connection(shm, direct=node.allreduce(shm.can_read_peers(), op=MPI.LAND))
    if transport == "mpi":
        return Connection(_C.MpiBackend(endpoint(world), *_agreed_mpi_slots(world, settings),
                                        timeout, threaded()))
    return _hierarchical(world, node, settings, timeout)


def _agreed_mpi_slots(world, settings):
    """The ring's slots over MPI: rank 0's, since every rank must cut segments alike."""
    return world.bcast(ring_slots(settings, "mpi"), root=0)


def _hierarchical(world, node, settings, timeout):
    local_rank, local_size = node.Get_rank(), node.Get_size()
    uniform = len(set(world.allgather(local_size))) == 1
    cross = None
    # with one rank per node (or one node) the flat algorithms are the hierarchical ones
    if uniform and 1 < local_size < world.Get_size():
        cross = world.Split(local_rank, world.Get_rank())
    cross_endpoint = endpoint(cross, names=cross.allgather(world.Get_rank())) if cross else None
    mpi_slots = _agreed_mpi_slots(world, settings)
    backend = _node_segment(node, settings, lambda name, create, size, slots, slot_bytes,
                            one_shot: _C.HierarchicalBackend(
                                name, create, local_rank, size, slots, slot_bytes, one_shot,
                                timeout, endpoint(world), cross_endpoint, *mpi_slots,
                                threaded()))
    return Connection(backend, comms=[cross] if cross else [])


def _node_segment(node, settings, make):
    """make(name, create, ranks, fifo slots, slot bytes, one-shot bytes) on every rank of
    `node`, over one segment, in the sizes of local rank 0's settings."""
    config = None
    if node.Get_rank() == 0:
        config = (fresh_name()[0], *ring_slots(settings, "shm"), settings.one_shot_bytes)
    name, slots, slot_bytes, one_shot = node.bcast(config, root=0)
    return map_everywhere(node, name, lambda create: make(name, create, node.Get_size(), slots,
                                                          slot_bytes, one_shot))
