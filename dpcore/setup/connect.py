"""Making a communicator: the bootstrap over its wire (MPI, or a torch.distributed Store), which
ranks share a node, the transport and its backend. Runs once per communicator; every exchange
has a deadline (dpcore.setup.bootstrap), and a rank that fails here tells the others."""
import numbers

from .. import settings as _settings
from .bootstrap import Bootstrap
from .info import log_init, prefix
from .store_wire import StoreWire, refuse_what_needs_mpi, trace_gather
from . import p2p_channel, transports


class Made:
    """What set-up hands the Communicator: the bootstrap and this rank's node (bootstrap
    Groups), the settings and timeout, the transport's name and backend, the point-to-point
    engine (p2p_channel.py), whether direct can run,
    one_shot's slot bytes, the MPI communicators made (to free at close), and how a trace's
    events meet at rank 0 without MPI (None over MPI)."""

    def __init__(self, **facts):
        self.__dict__.update(facts)


def communicator(mpi_comm, timeout, store, rank, size):
    """Made, on every rank of mpi_comm (or of the store's `size` ranks) at once."""
    wire = _wire(mpi_comm, store, rank, size)
    try:  # a bad setting or timeout raises here, but only once the peers can be told
        settings, wrong = _settings.load(), None
        timeout = settings.timeout if timeout is None else _settings.timeout_seconds(timeout)
    except (TypeError, ValueError) as e:
        settings, timeout, wrong = None, _settings.Settings().timeout, e
    # Every exchange from here on is point to point with a deadline (dpcore.setup.bootstrap):
    # a blocking MPI call would wait forever for a rank that died.
    boot = Bootstrap(wire, timeout)
    try:
        if wrong is not None:
            raise wrong
        return _connect(boot, settings, timeout)
    except BaseException as e:
        boot.fail(e)  # the peers raise too, instead of waiting for this rank
        raise


def _connect(boot, settings, timeout):
    from ..cost import auto  # every rank chooses by rank 0's fitted cost model

    if boot.comm is None:  # made on a store: no MPI to carry anything past shared memory
        refuse_what_needs_mpi(boot, settings)
    nodes = _nodes(boot, settings.node_size)
    node = boot.group(next(n for n in nodes if boot.rank in n))
    transport = transports.choose(settings.transport, boot, node)
    auto.agree(boot.world)
    # one_shot's slot: the most bytes per rank it takes (local rank 0's setting, as the segment
    # is made by it)
    one_shot_bytes = node.bcast(settings.one_shot_bytes, 0, "init: agree on one_shot's slot")
    connection = transports.connect(transport, boot, nodes, settings, timeout)
    p2p, p2p_comms = p2p_channel.connect(transport, boot, node, timeout, connection.direct)
    if settings.debug == "INFO":
        log_init(boot, nodes, node, transport, settings, timeout)
        connection.backend.log_choices(prefix(boot.rank))
    return Made(boot=boot, node=node, settings=settings, timeout=timeout, transport=transport,
                backend=connection.backend, direct=connection.direct,
                one_shot_bytes=one_shot_bytes, p2p=p2p,
                comms=[c for c in (*connection.comms, *p2p_comms, boot.comm) if c is not None],
                trace_gather=None if boot.comm is not None else trace_gather(boot.wire, timeout))


def _nodes(boot, node_size):
    """The world ranks of each node, in order of their first rank: the ranks of a host, or
    with DPCORE_NODE_SIZE=k, virtual nodes of k consecutive ranks."""
    keys = [r // node_size for r in range(boot.size)] if node_size > 0 else boot.hosts
    nodes = {}
    for r, key in enumerate(keys):
        nodes.setdefault(key, []).append(r)
    return list(nodes.values())


def _wire(mpi_comm, store, rank, size):
    """What the bootstrap's messages travel on: the store, where one is given, else MPI."""
    if store is None:
        if rank is not None or size is not None:
            raise ValueError("dpcore.init: rank and size go with a store; over MPI they are "
                             "the communicator's")
        from mpi4py import MPI

        from .mpi_wire import MpiWire
        return MpiWire(mpi_comm if mpi_comm is not None else MPI.COMM_WORLD)
    if mpi_comm is not None:
        raise ValueError("dpcore.init: an MPI communicator or a store, not both")
    for name, value in (("rank", rank), ("size", size)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"dpcore.init: with a store, {name} must be an int, not "
                            f"{type(value).__name__}")
    if not 0 <= rank < size:
        raise ValueError(f"dpcore.init: rank {rank} is not in [0, {size})")
    return StoreWire(store, int(rank), int(size))
