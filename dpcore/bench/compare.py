"""What the bench times beside dpcore, on the same buffers in the same run (--compare): MPI's own
collective on host buffers (and, next, NCCL's on GPU buffers). Each offers supports(coll, case)
and run(coll, send, recv, case, in_place), and its columns are named by `name` ("mpi time",
"mpi busbw", ...)."""
from .collectives import mpi_supported


class MpiReference:
    name, label = "mpi", "MPI"

    def __init__(self, mpi):
        self.mpi = mpi

    @staticmethod
    def supports(coll, case):
        return mpi_supported(coll, case)

    def run(self, coll, send, recv, case, in_place):
        coll.run_mpi(self.mpi, send, recv, case, in_place)

    def close(self):
        pass
