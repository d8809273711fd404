"""Set-up: what runs when a communicator is made (and when comm.alloc maps memory), never on a
collective's path.

    connect.py           a communicator's set-up, start to end: wire, bootstrap, nodes, backend
    bootstrap.py         set-up exchanges with deadlines, watching pids, over a wire:
    mpi_wire.py          an MPI communicator, or
    store_wire.py        a torch.distributed Store
    transports.py        choosing the transport and connecting its backend (shm, mpi, shm+mpi)
    device_transport.py  connecting the device transport, at the first call on CUDA arrays
    mpi_endpoint.py      what the C++ MPI transport needs of an mpi4py communicator
    mpi_comms.py         the MPI communicators made, freed at close or when dropped
    segments.py          shared-memory segments: the communicator's own and comm.alloc's
"""
