"""The MPI communicators a Communicator makes (duplicates of the caller's: the bootstrap's and its
transport's): made with a clear error where MPI has none left, and freed at close() or, for a
Communicator dropped without close(), once it is garbage-collected. MPICH holds about 2048 (its
context ids), a few per Communicator: a program that opened a Communicator per step used to fail
in init() after some 500 with a bare "Other MPI error".
"""
import weakref


def made(make, what):
    """make() (an mpi4py Dup, Idup or Split: `what`), or RuntimeError saying why it failed."""
    from mpi4py import MPI

    try:
        return make()
    except MPI.Exception as e:
        raise RuntimeError(
            f"dpcore: MPI could not make a communicator ({what}), most likely because all it "
            f"has room for are in use: close() every dpcore communicator when done with it (or "
            f"use `with dpcore.init() as comm:`), and Free() MPI communicators of your own. "
            f"MPI said: {e.Get_error_string()}") from e


def release_when_dropped(owner, backend, comms, boot):
    """A weakref.finalize that, when called (by close()) or when `owner` is garbage-collected,
    waits for `backend`'s queued collectives, tells the peers this rank makes no more calls
    (through the backend, and through `boot`, the dpcore.setup.bootstrap.Bootstrap, to peers in
    alloc), and then frees the mpi4py communicators `comms`, which the backend's MPI calls use.
    At exit MPI_Finalize frees whatever is left."""
    release = weakref.finalize(owner, _release, backend, list(comms), boot)
    release.atexit = False
    return release


def _release(backend, comms, boot):
    backend.drain()
    if comms:  # none where the communicator was made on a store: MPI may not even be there
        from mpi4py import MPI

        if MPI.Is_finalized():  # too late for Free; MPI_Finalize has freed them
            return
    # after close()'s own goodbyes these say nothing more
    backend.leave("dropped its communicator")
    boot.leave("dropped its communicator")
    for c in comms:
        c.Free()
