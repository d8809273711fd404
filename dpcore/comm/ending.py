"""How a process ends once one of its collectives failed: MPI_Finalize gets a grace period.

MPI_Finalize waits for every process of the job, so a rank that leaves Python normally after a
CommError (a peer died, failed, or called another collective) waits there for as long as the
failed peer's process lingers, and forever if it never finalizes. dpcore's own commands end with
os._exit (dpcore._cli.errors); a library user's or a torch script's process gets help at its
exit: dpcore's exit hook (communicator.py) calls end(), which, where a call failed here and MPI
still runs with other ranks, arms _C.exit_after: a thread of its own that ends the process with
_exit after GRACE_S unless MPI_Finalize returned first (no Python code runs by then).

Why a grace period and not os._exit at once: under MPICH's launcher a process that ends without
MPI_Finalize makes it kill every other rank of the job at once, so ranks that handled the error
and are still writing their results would be cut off; ranks that all end normally (a mismatch
fails every rank alike) finalize together within the grace and exit as usual. MPI_Abort would
end the peers at once too, and could lose the lines just printed. The status is 1 where an
uncaught exception ended the program (sys.last_value), else 0 (a sys.exit(n)'s n is not known
at exit).
"""
import sys

from .. import _C

GRACE_S = 2.0  # for the peers that end normally to reach MPI_Finalize too

_failed: list[str] = []  # why this process's first failed call failed


def note_failure(error):
    """A call (or an init) failed on this rank: MPI_Finalize may now wait for a failed peer.
    (Not a call that every rank refused alike, which leaves the communicator working: its
    message says so, csrc/core/call.cc.)"""
    why = str(error)
    if not _failed and "the communicator stays usable" not in why:
        _failed.append(why)


def end(also_failed=False):
    """At exit: if a call failed here (or `also_failed`: an async one nobody waited for) and
    MPI runs with other ranks, let MPI_Finalize wait GRACE_S at most."""
    if not (_failed or also_failed):
        return
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return
    if mpi.COMM_WORLD.Get_size() > 1:
        _C.exit_after(GRACE_S, 1 if getattr(sys, "last_value", None) is not None else 0)
