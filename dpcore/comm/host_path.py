"""The host path: collectives on NumPy arrays and CPU DLPack exports (a torch CPU tensor), run by
the communicator's transport backend (shared memory, MPI, or both; dpcore.setup.transports).
Arrays are taken as NumPy views, without copies, and results go back in the caller's type."""
import numpy as np

from .. import _C
from .choice import AUTO, RING, Rules
from .host_arrays import as_numpy, check_contiguous


class HostPath:
    """One communicator's host side (dpcore.comm.path.Path)."""

    def __init__(self, backend, size, rank, transport, one_shot_bytes, direct):
        from ..cost import auto  # the fitted model's bands: loaded with the first communicator

        # run and submit are the backend's own: a blocking call crosses no Python frame here
        self.run, self.submit = backend.run, backend.submit
        self._exchange_counts, self.algo_calls = backend.exchange_counts, backend.algo_calls
        no_direct = None if direct else (
            "dpcore: algo 'direct' needs ranks on one node that may read each other's memory "
            "(process_vm_readv); not available here")
        self.rules = Rules(auto.bands(size, one_shot_bytes, transport),
                           lambda coll, nbytes: auto.fill(coll, nbytes, size, one_shot_bytes,
                                                          rank, transport),
                           AUTO if direct else RING, one_shot_bytes, no_direct)

    def exchange_counts(self, coll, root, dtype, count, shard):
        return self._exchange_counts(coll, root, dtype, count)

    @staticmethod
    def view(x, what):
        """(a NumPy view of x, a function that turns a NumPy result into x's type, or None)."""
        return (x, None) if type(x) is np.ndarray else as_numpy(x, what)

    @staticmethod
    def out_view(out, what):
        """A caller's out as a NumPy view; TypeError where it lives on a device."""
        return out if type(out) is np.ndarray else as_numpy(out, what)[0]

    @staticmethod
    def check(a, what):
        if not a.flags.c_contiguous:
            check_contiguous(a, what)  # raises

    writable = staticmethod(lambda a: a.flags.writeable)

    @staticmethod
    def empty(a, shape, wrap):
        """(a new array for the result, as the path sees it; as the caller gets it)."""
        out = np.empty(shape, a.dtype)
        return out, (wrap(out) if wrap else out)

    # where b starts, in bytes from a's start, if their memory overlaps; else None
    overlap = staticmethod(_C.overlap)
