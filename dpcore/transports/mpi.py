"""What the C++ MPI transport needs of an mpi4py communicator: its handles, as plain integers.

The transport calls MPI_Isend and friends of the library mpi4py loaded (csrc/mpi/mpi_api.h); a
handle is an int in MPICH and a pointer in Open MPI, so it travels with its width.
"""


def endpoint(mpi_comm, names=None):
    """(handle bytes, communicator, MPI_BYTE, rank, size, rank names) of `mpi_comm`. names:
    what to call each rank in messages (default: its rank in mpi_comm)."""
    from mpi4py import MPI

    width = MPI._sizeof(MPI.Comm)
    mask = (1 << (8 * width)) - 1  # mpi4py may hand an int handle back sign-extended
    size = mpi_comm.Get_size()
    return (width, MPI._handleof(mpi_comm) & mask, MPI._handleof(MPI.BYTE) & mask,
            mpi_comm.Get_rank(), size, list(names) if names is not None else list(range(size)))


def threaded():
    """Whether MPI may be called from the background thread that runs async collectives; if not,
    they run at once on the caller's thread."""
    from mpi4py import MPI

    return MPI.Query_thread() == MPI.THREAD_MULTIPLE
