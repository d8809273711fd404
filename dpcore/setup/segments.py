"""Shared-memory segments that the ranks of a node map: the communicator's own (FIFOs, flags)
and those behind Communicator.alloc.

A segment's creator names it, the name travels over MPI, the peers map it, and then the creator
unlinks it at once: from then on the kernel frees it when the last mapping goes, however the job
ends, so no name outlives the job. The name travels before the segment is made, so where a rank
dies in between, its peers unlink what it made. Each step ends in an agreement among the node's ranks
(dpcore.setup.bootstrap.Group.on_every_rank), so a failure on one rank is raised on every rank
instead of leaving the peers waiting for it, and a rank that dies is noticed by its peers.
"""
import itertools
import os
import secrets
from pathlib import Path

import numpy as np

from .. import _C

_ids = itertools.count(1)  # of the segments this process created


def fresh_name():
    """(a name no other segment has, a number for it unique in this process)."""
    k = next(_ids)
    return f"/dpcore-{os.getpid()}-{k}-{secrets.token_hex(4)}", k


def unlink(names):
    """Removes the segments `names` where they exist: those a failed setup may have left."""
    for name in names:
        try:
            os.unlink("/dev/shm" + name)
        except FileNotFoundError:
            pass


def unlink_made_by(pid):
    """Removes the segments process `pid` of this host made (their names begin with its pid,
    fresh_name): once it is dead, no rank may map them any more, and nobody else knows them
    all (a peer that failed before the names reached it)."""
    unlink("/" + p.name for p in Path("/dev/shm").glob(f"dpcore-{pid}-*"))


def map_everywhere(node, name, attach):
    """attach(create) on every rank of `node` (a dpcore.setup.bootstrap.Group) for one segment that
    rank 0 creates: the communicator's own."""
    first, made = node.rank == 0, None
    try:
        made = node.on_every_rank(lambda: attach(True) if first else None,
                                  f"init: create shared memory {name}")
        return node.on_every_rank(lambda: made if first else attach(False),
                                  f"init: map shared memory {name}")
    except BaseException:
        unlink([name])  # the creator may have died after making it
        raise
    finally:
        if made is not None:  # the creator's: once every rank has mapped it, or failed to
            made.unlink()


def agreed_request(node, shape, dtype, what="alloc"):
    """(shape, dtype, bytes) of an alloc call, once every rank of `node` asked for as many
    bytes of the same dtype (a peer maps each rank's buffer at its own size); ValueError on
    every rank otherwise."""
    dtype = np.dtype(dtype)
    shape = (shape,) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    asked = node.allgather((nbytes, dtype.str), f"{what}: compare the sizes")
    if len(set(asked)) != 1:
        raise ValueError(f"dpcore {what}: every rank must ask for the same buffer; ranks asked "
                         f"for {sorted(set(asked))} (bytes, dtype)")
    return shape, dtype, nbytes


def alloc(node, transport, backend, shape, dtype):
    """Communicator.alloc: a zero-filled array per rank of `node` (a bootstrap Group), in a
    segment of its own that every peer of the node maps too (_C.SharedBuffer), known to
    `backend` so that direct finds it."""
    shape, dtype, nbytes = agreed_request(node, shape, dtype)
    if transport != "shm" or node.size == 1 or nbytes == 0:
        return np.zeros(shape, dtype)  # nothing to share: ordinary memory serves as well
    mine, k = fresh_name()
    names = node.allgather(mine, "alloc: exchange names")
    region = node.bcast(k, 0, "alloc: agree on a number")  # rank 0's: unique in every table
    rank = node.rank
    buffer = _C.SharedBuffer(node.size, rank, nbytes)
    try:
        node.on_every_rank(lambda: buffer.create(mine), "alloc: create shared memory")
        node.on_every_rank(lambda: [buffer.open(r, name) for r, name in enumerate(names)
                                    if r != rank], "alloc: map the peers' buffers")
    except BaseException:
        unlink(names)  # a peer may have died after making its own
        raise
    finally:
        buffer.unlink()
    buffer.share(backend, region, node.allgather(buffer.address, "alloc: addresses"))
    # the array keeps the buffer (and with it every mapping) alive through its base
    return np.frombuffer(buffer, dtype=dtype, count=nbytes // dtype.itemsize).reshape(shape)
