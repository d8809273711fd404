"""What the C++ MPI transport needs of an mpi4py communicator: its handles, as plain integers.

The transport calls MPI_Isend and friends of the library mpi4py loaded (csrc/mpi/mpi_api.h); a
handle is an int in MPICH and a pointer in Open MPI, so it travels with its width.
"""


def endpoint(mpi_comm, members, pids):
    """(handle bytes, communicator, MPI_BYTE, rank, size, members, their pids) of the ranks
    `members` of `mpi_comm` (a duplicate of the communicator's own; this rank among them):
    their ranks in mpi_comm, which are also their names in messages, and their pids where
    they run on this host (else 0)."""
    from mpi4py import MPI

    width = MPI._sizeof(MPI.Comm)
    mask = (1 << (8 * width)) - 1  # mpi4py may hand an int handle back sign-extended
    members = list(members)
    return (width, MPI._handleof(mpi_comm) & mask, MPI._handleof(MPI.BYTE) & mask,
            members.index(mpi_comm.Get_rank()), len(members), members,
            [pids[r] for r in members])


def threaded():
    """Whether MPI may be called from the background thread that runs async collectives; if not,
    they run at once on the caller's thread."""
    from mpi4py import MPI

    return MPI.Query_thread() == MPI.THREAD_MULTIPLE
