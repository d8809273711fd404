"""Bad local input raises TypeError or ValueError on the rank that made it, before anything is
sent: the other ranks never see the call, and the next collective, on all ranks, is correct.

Usage: mpiexec -n K python -m mpi4py bad_input.py
"""
import numpy as np
from mpi4py import MPI

import dpcore
from checks import Checker, make_input, mpi_allreduce

world = MPI.COMM_WORLD
comm = dpcore.init(timeout=20)  # a bad call that did send something would hang the next one
rank, size = comm.rank, comm.size
check = Checker(rank)

f32 = np.float32
x = np.arange(12, dtype=f32)
read_only = np.zeros(12, f32)
read_only.flags.writeable = False
shard_len = lambda n: (lambda a, b: b - a)(*dpcore.shard_range(n, size, rank))

# (what, expected exception, the bad call)
BAD = [
    ("all_reduce non-contiguous", ValueError, lambda: comm.all_reduce(x[::2])),
    ("all_reduce Fortran-order 2-D", ValueError,
     lambda: comm.all_reduce(np.asfortranarray(x.reshape(3, 4)))),
    ("reduce_scatter non-contiguous", ValueError, lambda: comm.reduce_scatter(x[::3])),
    ("all_gather non-contiguous", ValueError, lambda: comm.all_gather(x[::2])),
    ("all_gather non-contiguous, out=", ValueError,
     lambda: comm.all_gather(x[::2], out=np.empty(6 * size, f32))),
    ("broadcast non-contiguous", ValueError, lambda: comm.broadcast(x[::2])),
    ("all_reduce complex64", TypeError, lambda: comm.all_reduce(np.ones(4, np.complex64))),
    ("all_reduce bool", TypeError, lambda: comm.all_reduce(np.ones(4, bool))),
    ("all_reduce int16", TypeError, lambda: comm.all_reduce(np.ones(4, np.int16))),
    ("all_reduce uint16", TypeError, lambda: comm.all_reduce(np.ones(4, np.uint16))),
    ("all_reduce object", TypeError, lambda: comm.all_reduce(np.array([1, "a"], object))),
    ("reduce_scatter complex128", TypeError, lambda: comm.reduce_scatter(np.ones(4, complex))),
    ("all_gather complex128", TypeError, lambda: comm.all_gather(np.ones(4, complex))),
    ("broadcast float128", TypeError, lambda: comm.broadcast(np.ones(4, np.longdouble))),
    ("all_reduce big-endian float32", TypeError, lambda: comm.all_reduce(np.ones(4, ">f4"))),
    ("all_reduce of a list", TypeError, lambda: comm.all_reduce([1.0, 2.0])),
    ("all_reduce out wrong length", ValueError,
     lambda: comm.all_reduce(x, out=np.empty(13, f32))),
    ("all_reduce out wrong shape, same size", ValueError,
     lambda: comm.all_reduce(x, out=np.empty((3, 4), f32))),
    ("all_reduce out wrong dtype", TypeError, lambda: comm.all_reduce(x, out=np.empty(12))),
    ("all_reduce out read-only", ValueError, lambda: comm.all_reduce(x, out=read_only)),
    ("all_reduce in place on a read-only x", ValueError,
     lambda: comm.all_reduce(read_only, out=read_only)),
    ("all_reduce out non-contiguous", ValueError,
     lambda: comm.all_reduce(x, out=np.empty(24, f32)[::2])),
    ("all_reduce out is a list", TypeError, lambda: comm.all_reduce(x, out=[0.0] * 12)),
    ("reduce_scatter out wrong length", ValueError,
     lambda: comm.reduce_scatter(x, out=np.empty(shard_len(12) + 1, f32))),
    ("reduce_scatter out wrong dtype", TypeError,
     lambda: comm.reduce_scatter(x, out=np.empty(shard_len(12), np.int32))),
    ("reduce_scatter out read-only", ValueError,
     lambda: comm.reduce_scatter(x, out=read_only[:shard_len(12)])),
    ("all_gather out wrong dtype", TypeError,
     lambda: comm.all_gather(x[:3], out=np.empty(3 * size, np.float64))),
    ("all_gather out read-only", ValueError,
     lambda: comm.all_gather(x[:1], out=read_only[:size])),
    ("broadcast read-only x", ValueError, lambda: comm.broadcast(read_only)),
    ("all_reduce op 'mean'", ValueError, lambda: comm.all_reduce(x, op="mean")),
    ("all_reduce op 'SUM'", ValueError, lambda: comm.all_reduce(x, op="SUM")),
    ("all_reduce op None", ValueError, lambda: comm.all_reduce(x, op=None)),
    ("reduce_scatter op 'xor'", ValueError, lambda: comm.reduce_scatter(x, op="xor")),
    ("all_reduce avg int32", TypeError,
     lambda: comm.all_reduce(np.ones(4, np.int32), op="avg")),
    ("all_reduce avg uint8", TypeError,
     lambda: comm.all_reduce(np.ones(4, np.uint8), op="avg")),
    ("reduce_scatter avg int64", TypeError,
     lambda: comm.reduce_scatter(np.ones(4, np.int64), op="avg")),
    ("broadcast root -1", ValueError, lambda: comm.broadcast(x.copy(), root=-1)),
    ("broadcast root == size", ValueError, lambda: comm.broadcast(x.copy(), root=size)),
    ("broadcast root 0.0", ValueError, lambda: comm.broadcast(x.copy(), root=0.0)),
    ("broadcast root '0'", ValueError, lambda: comm.broadcast(x.copy(), root="0")),
    ("broadcast root None", ValueError, lambda: comm.broadcast(x.copy(), root=None)),
    ("all_reduce algo 'tree'", ValueError, lambda: comm.all_reduce(x, algo="tree")),
    ("all_reduce algo None", ValueError, lambda: comm.all_reduce(x, algo=None)),
    ("all_reduce algo 'Ring'", ValueError, lambda: comm.all_reduce(x, algo="Ring")),
    ("reduce_scatter algo ''", ValueError, lambda: comm.reduce_scatter(x, algo="")),
    ("all_gather algo 'tree'", ValueError, lambda: comm.all_gather(x[:2], algo="tree")),
    ("all_gather algo 'tree', out=", ValueError,
     lambda: comm.all_gather(x[:2], out=np.empty(2 * size, f32), algo="tree")),
    ("broadcast algo 'tree'", ValueError, lambda: comm.broadcast(x.copy(), algo="tree")),
    ("one_shot over its size limit", ValueError,
     lambda: comm.all_reduce(np.zeros(1 << 20, f32), algo="one_shot")),
    ("reduce out on a non-root", ValueError,
     lambda: comm.reduce(x, root=(rank + 1) % size, out=np.empty(12, f32)) if size > 1
     else comm.reduce(x, root=1)),
    ("reduce out=x on a non-root", ValueError,
     lambda: comm.reduce(x.copy(), root=(rank + 1) % size, out=x) if size > 1
     else comm.reduce(x, root=-1)),
    ("reduce root -1", ValueError, lambda: comm.reduce(x, root=-1)),
    ("reduce root == size", ValueError, lambda: comm.reduce(x, root=size)),
    ("reduce root '0'", ValueError, lambda: comm.reduce(x, root="0")),
    ("reduce non-contiguous", ValueError, lambda: comm.reduce(x[::2])),
    ("reduce complex64", TypeError, lambda: comm.reduce(np.ones(4, np.complex64))),
    ("reduce avg int32", TypeError, lambda: comm.reduce(np.ones(4, np.int32), op="avg")),
    ("reduce op 'mean'", ValueError, lambda: comm.reduce(x, op="mean")),
    ("reduce algo 'tree'", ValueError, lambda: comm.reduce(x, algo="tree")),
    ("reduce out wrong shape on the root", ValueError,
     lambda: comm.reduce(x, root=rank, out=np.empty((3, 4), f32))),
    ("reduce out wrong dtype on the root", TypeError,
     lambda: comm.reduce(x, root=rank, out=np.empty(12))),
    ("reduce out read-only on the root", ValueError,
     lambda: comm.reduce(x, root=rank, out=read_only)),
    ("reduce out partly overlapping x on the root", ValueError,
     lambda: (lambda b: comm.reduce(b[:12], root=rank, out=b[1:13]))(np.zeros(13, f32))),
    ("async reduce root == size", ValueError,
     lambda: comm.reduce(x, root=size, async_op=True)),
    ("async all_reduce non-contiguous", ValueError,
     lambda: comm.all_reduce(x[::2], async_op=True)),
    ("async all_reduce bad op", ValueError,
     lambda: comm.all_reduce(x, op="mean", async_op=True)),
    # gather, scatter, all_to_all
    ("gather non-contiguous", ValueError, lambda: comm.gather(x[::2], root=rank)),
    ("gather root == size", ValueError, lambda: comm.gather(x, root=size)),
    ("gather algo 'ring' (does not run it)", ValueError, lambda: comm.gather(x, algo="ring")),
    ("gather out wrong dtype", TypeError,
     lambda: comm.gather(x, root=rank, out=np.empty(12 * size, np.int32))),
    ("gather out read-only", ValueError,
     lambda: comm.gather(x[:1], root=rank, out=read_only[:size])),
    ("scatter x None on the root", ValueError,
     lambda: comm.scatter(None, np.empty(3, f32), root=rank)),
    ("scatter out read-only", ValueError,
     lambda: comm.scatter(np.ones(12 * size, f32), read_only, root=rank)),
    ("scatter out wrong dtype", TypeError,
     lambda: comm.scatter(np.ones(3 * size, f32), np.empty(3, np.int32), root=rank)),
    ("scatter out inside x", ValueError,
     lambda: (lambda y: comm.scatter(y, y[:3], root=rank))(np.ones(3 * size, f32))),
    ("scatter algo 'tree'", ValueError,
     lambda: comm.scatter(np.ones(3 * size, f32), np.empty(3, f32), root=rank, algo="tree")),
    ("all_to_all splits of the wrong length", ValueError,
     lambda: comm.all_to_all(x, splits=[12] + [0] * size)),
    ("all_to_all splits that do not add up to x.size", ValueError,
     lambda: comm.all_to_all(x, splits=[1] * size)),
    ("all_to_all negative split", ValueError,
     lambda: comm.all_to_all(x, splits=[-1] + [0] * (size - 2) + [13])),
    ("all_to_all out_splits of the wrong length", ValueError,
     lambda: comm.all_to_all(x[:size], out_splits=[1] * (size + 1))),
    ("all_to_all out wrong size", ValueError,
     lambda: comm.all_to_all(x[:size], out=np.empty(size + 1, f32))),
    ("all_to_all out is x", ValueError, lambda: comm.all_to_all(x, out=x)),
    ("all_to_all algo 'ring'", ValueError, lambda: comm.all_to_all(x[:size], algo="ring")),
    ("all_to_all one_shot over its size limit", ValueError,
     lambda: comm.all_to_all(np.zeros(size << 20, f32), algo="one_shot")),
] + ([  # what only one of several ranks can get wrong
    ("gather out off the root", ValueError,
     lambda: comm.gather(x, root=(rank + 1) % size, out=np.empty(12 * size, f32))),
    ("scatter x off the root", ValueError,
     lambda: comm.scatter(x, np.empty(3, f32), root=(rank + 1) % size)),
    ("all_to_all x.size not a multiple of the ranks", ValueError,
     lambda: comm.all_to_all(np.ones(size + 1, f32))),
] if size > 1 else [])

for k, (what, error, call) in enumerate(BAD):
    culprit = k % size
    if rank == culprit:
        try:
            call()
            check.true(False, f"{what}: no exception (expected {error.__name__})")
        except error:
            pass
        except Exception as e:
            check.true(False, f"{what}: raised {type(e).__name__}: {e} (expected "
                              f"{error.__name__})")
    # every rank, the culprit included: a correct collective right after the bad call
    good = make_input(np.dtype(np.int32), "sum", 7 + k, rank, size)
    try:
        check.equal(comm.all_reduce(good), mpi_allreduce(world, good, "sum"),
                    f"all_reduce after '{what}' on rank {culprit}")
    except dpcore.CommError as e:
        # The bad call reached the peers. Report it, and go on with a fresh communicator.
        check.true(False, f"'{what}' on rank {culprit} was not refused locally: the next "
                          f"all_reduce raised CommError: {e}")
        comm = dpcore.init(timeout=20)

comm.close()
check.finish()
