"""What the bench times beside dpcore, on the same buffers in the same run (--compare): MPI's own
collective on host buffers, NCCL's (through CuPy) on GPU buffers. Either offers
supports(coll, case) and run(coll, send, recv, case, in_place), and its columns are named by
`name` ("mpi time", "nccl busbw", ...)."""
import numpy as np

from .devices import one_line

# -- MPI datatypes and ops ------------------------------------------------------------------

_MPI_NAMES = {"float32": "FLOAT", "float64": "DOUBLE", "int8": "INT8_T", "uint8": "UINT8_T",
              "int32": "INT32_T", "uint32": "UINT32_T", "int64": "INT64_T", "uint64": "UINT64_T"}
_MPI_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN", "avg": "SUM"}


def mpi_supported(coll, case):
    """Whether MPI can run this case: it has no float16/bfloat16 reduction."""
    return not coll.reduces or case.dtype_name in _MPI_NAMES


def mpi_buf(a, case):
    from mpi4py import MPI

    if case.dtype_name in _MPI_NAMES:
        return [a, getattr(MPI, _MPI_NAMES[case.dtype_name])]
    return [a.view(np.uint16), MPI.UINT16_T]  # moving 16-bit floats needs no arithmetic


def mpi_op(case):
    from mpi4py import MPI

    return getattr(MPI, _MPI_OPS[case.op])  # avg is timed as MPI's SUM


# NCCL's names in cupy.cuda.nccl. The in-place layouts are the harness's: reduce_scatter's output
# and all_gather's input are the rank's shard of the larger buffer, at rank * count as NCCL wants.
NCCL_TYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
              "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
              "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64"}
NCCL_OPS = {"sum": "NCCL_SUM", "prod": "NCCL_PROD", "max": "NCCL_MAX", "min": "NCCL_MIN",
            "avg": "NCCL_AVG"}


def nccl_group(nccl, ops, case):
    """NCCL sends and recvs ((kind, array, peer), ...) in one group, as nccl-tests' hooks that
    NCCL has no collective for."""
    nccl.nccl.groupStart()
    try:
        for kind, a, peer in ops:
            getattr(nccl.comm, kind)(a.data.ptr, a.size, nccl.dtype(case), peer, nccl.stream)
    finally:
        nccl.nccl.groupEnd()


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
