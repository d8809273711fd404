"""The dpcore communicator under a torch process group, ordered by torch's ranks.

Under mpiexec (whatever torch's init_method) the communicator is built over MPI: the group's
ranks tell each other their MPI rank through the group's store, and the communicator is made
over exactly those MPI ranks in torch's rank order, so torch's rank r is dpcore's rank r even
where the two numberings differ (a rank given by hand, a group of some ranks). Without MPI in
the job (launched by torchrun), dpcore bootstraps through the store itself:
dpcore.init(store=, rank=, size=, timeout=). Under mpiexec with torch's default env://, the
variables torchrun would set come from MPI (fill_env_from_launcher, at `import dpcore.torch`).
"""
import math
import os
import socket
from datetime import timedelta

from torch.distributed.constants import default_pg_timeout

import dpcore
from ..settings import load as load_settings
from ..setup.bootstrap import MPI_RANK_VARIABLES


def under_mpi():
    return any(v in os.environ for v in MPI_RANK_VARIABLES)


def fill_env_from_launcher() -> None:
    """Under mpiexec (or srun with MPI) without torchrun's variables, set them as torchrun does,
    so that init_process_group("dpcore") with env:// (torch's default) needs no code of the
    user's: RANK and WORLD_SIZE from MPI, LOCAL_RANK and LOCAL_WORLD_SIZE from this host's
    ranks, and MASTER_ADDR:MASTER_PORT (torch's store) on rank 0's host at a port free there.
    A collective over MPI_COMM_WORLD: every rank imports dpcore.torch, as every rank joins the
    process group. Variables already set (RANK, or a chosen MASTER_ADDR) are left alone."""
    if "RANK" in os.environ or not under_mpi():
        return
    try:
        from mpi4py import MPI
    except ImportError:  # no MPI to ask: env:// says what it lacks, as without dpcore
        return

    world = MPI.COMM_WORLD
    address = None
    if world.rank == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            address = (socket.gethostname(), str(s.getsockname()[1]))
    host, port = world.bcast(address, root=0)
    local = world.Split_type(MPI.COMM_TYPE_SHARED)
    os.environ.update(RANK=str(world.rank), WORLD_SIZE=str(world.size),
                      LOCAL_RANK=str(local.rank), LOCAL_WORLD_SIZE=str(local.size))
    local.Free()
    os.environ.setdefault("MASTER_ADDR", host)
    os.environ.setdefault("MASTER_PORT", port)


def seconds(timeout):
    """dpcore's timeout for torch's: torch's default (30 min, what every group gets unless the
    caller sets one) leaves dpcore's own (DPCORE_TIMEOUT, else 300 s), a chosen one is used."""
    if timeout is None or timeout == default_pg_timeout:
        return None
    return timeout.total_seconds()


def communicator(store, rank, size, timeout):
    """A dpcore communicator whose rank `rank` is this process, over the `size` ranks that
    share `store` (the group's own store: every group gets a fresh prefix)."""
    if under_mpi():
        return _over_mpi(store, rank, size, seconds(timeout))
    return dpcore.init(store=store, rank=rank, size=size, timeout=seconds(timeout))


def agree_on_members(store, members, rank, timeout):
    """Raise CommError unless every rank of the group believes in the same members (global
    ranks, as new_group was given them; empty for the default group): ranks that disagree
    would otherwise form one communicator of ranks that each think the group is another."""
    members = list(members)
    if not members:
        return
    store.set(f"dpcore/members/{members[rank]}", repr(members))
    keys = [f"dpcore/members/{m}" for m in members]
    limit = seconds(timeout)
    limit = limit if limit is not None else load_settings().timeout
    try:
        if math.isfinite(limit):
            store.wait(keys, timedelta(seconds=limit))
        believed = {m: store.get(k).decode() for m, k in zip(members, keys)}
    except Exception as e:  # torch's DistStoreError: a member that never came
        first = (str(e).strip().splitlines() or [""])[0]  # torch appends a C++ stack
        raise dpcore.CommError(f"dpcore init on rank {rank}: the group's members {members} did "
                               f"not all come ({type(e).__name__}: {first})") from None
    differ = {m: b for m, b in believed.items() if b != repr(members)}
    if differ:
        theirs = "; ".join(f"global rank {m} has {b}" for m, b in differ.items())
        raise dpcore.CommError(f"dpcore init on rank {rank}: the ranks of new_group differ: "
                               f"global rank {members[rank]} has {members}, {theirs}")


def _over_mpi(store, rank, size, timeout):
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    store.set(f"dpcore/mpi_rank/{rank}", str(world.rank))
    keys = [f"dpcore/mpi_rank/{r}" for r in range(size)]
    # a rank that never comes fails this step at the timeout instead of hanging it
    limit = timeout if timeout is not None else load_settings().timeout
    if math.isfinite(limit):
        store.wait(keys, timedelta(seconds=limit))
    mpi_ranks = [int(store.get(k)) for k in keys]
    if len(set(mpi_ranks)) != size or max(mpi_ranks) >= world.size:
        raise RuntimeError(f"dpcore: the group's ranks are MPI ranks {mpi_ranks} of jobs of "
                           f"{world.size}: its processes are not all of one mpiexec job")
    if mpi_ranks == list(range(world.size)):
        return dpcore.init(world, timeout=timeout)
    # Only the group's members call this (MPI_Comm_create_group), in torch's rank order.
    ordered = world.Create_group(world.Get_group().Incl(mpi_ranks))
    # Kept, never freed (MPI_Finalize frees it): dpcore.init tells its communicators apart by
    # the handle of the one it is given, and a handle freed here could come back for a later
    # group on some ranks and not on others.
    _made.append(ordered)
    return dpcore.init(ordered, timeout=timeout)


_made: list = []  # MPI communicators
