"""The end of a command-line program that runs collectives: an error ends the whole job.

Under mpiexec, a rank that raises alone leaves the others waiting in a collective, and a
survivor's CommError (a peer died) leaves it waiting in MPI_Finalize, which waits for the dead
rank, for minutes. So every `python -m dpcore.*` entry point that communicates runs its main()
through run_main(). With other ranks, an uncaught exception is printed and the rank leaves
without MPI_Finalize, exit status 1:
  - after a CommError by os._exit alone: every other rank is dead or raises its own CommError,
    and the launcher sees a rank fail; MPI_Abort could lose the lines just printed (hydra may
    kill the forwarding proxy before it reads them);
  - after anything else by MPI_Abort first, as `python -m mpi4py` does: the others know
    nothing, and only MPI_Abort reaches them under every launcher.
Alone, the exception is raised as usual.
"""
import os
import sys
import traceback

from .. import CommError


def run_main(main, *args, **kwargs):
    """sys.exit(main(*args, **kwargs)), ending every rank of the job if it raises."""
    try:
        status = main(*args, **kwargs)
    except SystemExit:
        raise
    except BaseException as e:
        world = _world()
        if world is not None:
            traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
            if not isinstance(e, CommError):
                world.Abort(1)  # returns (MPICH) before the launcher ends this process
            os._exit(1)
        raise
    sys.exit(status)


def _world():
    """MPI.COMM_WORLD if MPI is running with other ranks, else None (not even importing MPI)."""
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is None or not MPI.Is_initialized() or MPI.Is_finalized():
        return None
    return MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None
