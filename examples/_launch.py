"""Starting torch.distributed for the examples, under mpiexec or torchrun.

Under torchrun, RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are set: env:// reads them.
Under mpiexec they are not: rank 0 picks a free port and tells the others (with its host
name) over MPI, and every rank meets there by tcp://. Either way dpcore's communicator is made
over MPI when MPI is in the job, and through torch's store when it is not.
"""
import os
import socket

import torch.distributed as dist

import dpcore.torch  # noqa: F401  (registers the backend "dpcore")


def init(backend="dpcore"):
    """init_process_group(backend); returns (rank, world size)."""
    if "RANK" in os.environ:
        dist.init_process_group(backend)
    else:
        from mpi4py import MPI

        world = MPI.COMM_WORLD
        address = None
        if world.rank == 0:
            with socket.socket() as s:
                s.bind(("", 0))
                address = (socket.gethostname(), s.getsockname()[1])
        host, port = world.bcast(address)
        dist.init_process_group(backend, init_method=f"tcp://{host}:{port}", rank=world.rank,
                                world_size=world.size)
    return dist.get_rank(), dist.get_world_size()
