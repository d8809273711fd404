"""What the bench times beside dpcore, on the same buffers in the same run (--compare): MPI's own
collective on host buffers, NCCL's (through CuPy) on GPU buffers. Either offers
supports(coll, case) and run(coll, send, recv, case, in_place), and its columns are named by
`name` ("mpi time", "nccl busbw", ...)."""
from .collectives import NCCL_OPS, NCCL_TYPES, mpi_supported
from .devices import one_line


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


class NcclReference:
    """One NCCL communicator over every rank, each on its own GPU; calls go to CuPy's current
    stream, which the bench's synchronize waits for."""

    name, label = "nccl", "NCCL"

    def __init__(self, nccl, comm, stream):
        self.nccl, self.comm, self.stream = nccl, comm, stream

    @staticmethod
    def supports(coll, case):
        return case.dtype_name in NCCL_TYPES

    def dtype(self, case):
        return getattr(self.nccl, NCCL_TYPES[case.dtype_name])

    def op(self, case):
        name = NCCL_OPS[case.op]
        if not hasattr(self.nccl, name):  # NCCL_AVG came with NCCL 2.10: time avg as a sum
            name = NCCL_OPS["sum"]
        return getattr(self.nccl, name)

    def run(self, coll, send, recv, case, in_place):
        coll.run_nccl(self, send, recv, case)

    def close(self):
        self.comm.destroy()


def nccl_left_out(ranks_on_node, device_count):
    """Why NCCL cannot run beside dpcore on this node, or None: NCCL refuses two ranks on one GPU
    (ncclCommInitRank fails with 'Duplicate GPU detected')."""
    if ranks_on_node > device_count:
        gpus = f"{device_count} GPU" + ("s" if device_count != 1 else "")
        return f"{ranks_on_node} ranks on a node with {gpus}, and NCCL refuses two ranks on one GPU"
    return None


def open_nccl(arrays, world):
    """(NcclReference, None), or (None, why NCCL is left out): the same on every rank.
    arrays: this rank's CudaArrays, its GPU already current; world: an mpi4py communicator."""
    reason = nccl_left_out(arrays.ranks_on_node, arrays.device_count)
    nccl = None
    if reason is None:
        try:
            from cupy.cuda import nccl
            if not getattr(nccl, "available", True):
                raise ImportError("this CuPy was built without NCCL")
        except Exception as e:
            reason = f"CuPy has no NCCL: {one_line(e)}"
    reason = next((r for r in world.allgather(reason) if r), None)
    if reason is not None:
        return None, reason
    rank = world.Get_rank()
    uid = world.bcast(nccl.get_unique_id() if rank == 0 else None, root=0)
    comm = nccl.NcclCommunicator(world.Get_size(), uid, rank)
    return NcclReference(nccl, comm, arrays.cupy.cuda.get_current_stream().ptr), None
