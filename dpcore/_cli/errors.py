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

Two endings are no error of the program's, and print no traceback: a UsageError (what the user
asked for cannot be done, and every rank knows it alike) prints one line, rank 0's, and every
rank exits with status 2 through MPI_Finalize as usual (MPI_Abort would leave MPICH's segment in
/dev/shm); a closed pipe (`| head` stopped reading) ends the program quietly.
"""
import os
import sys
import traceback

from .. import CommError
from .args import launcher_rank


class UsageError(Exception):
    """What the user asked for cannot be done (a path that cannot be written, a checkpoint that
    does not load), the same on every rank: raise it on every rank, or alone."""


def run_main(main, *args, **kwargs):
    """sys.exit(main(*args, **kwargs)), ending every rank of the job if it raises."""
    try:
        status = main(*args, **kwargs)
    except SystemExit:
        raise
    except UsageError as e:
        if launcher_rank() in (None, 0):
            print(f"{program()}: error: {e}", file=sys.stderr, flush=True)
        status = 2
    except BrokenPipeError:
        if _world() is not None:
            raise
        # stdout's reader is gone: the flush at exit would raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 0  # not an error of ours
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


def program():
    """This command's name as its user typed it: dpcore.cost for `python -m dpcore.cost`."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is None or not spec.name:
        return os.path.basename(sys.argv[0]) or "dpcore"
    return spec.name.removesuffix(".__main__")


def _world():
    """MPI.COMM_WORLD if MPI is running with other ranks, else None (not even importing MPI)."""
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is None or not MPI.Is_initialized() or MPI.Is_finalized():
        return None
    return MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None
