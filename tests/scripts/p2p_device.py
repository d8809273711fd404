"""Point-to-point on CUDA arrays, staged through host memory: on the CPU emulation with
DPCORE_CUDA_EMULATION=1 (CI), or on a GPU with DEVICE=cupy. send/recv of every dtype, small and
past the mailbox's inline piece, from any rank, an isend/irecv ring and a batch; the received
array is complete when recv (or wait) returns, whatever the array's stream still had queued.

Usage: mpiexec -n K python -m mpi4py p2p_device.py
"""
import numpy as np

import dpcore
from checks import DTYPES, Checker, device_arrays

xp, host = device_arrays()

comm = dpcore.init()
rank, size = comm.rank, comm.size
check = Checker(rank)


def data(dtype, count, src, dst):
    return ((np.arange(count) + src * 7 + dst * 3) % 100).astype(dtype)


if size > 1:
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    for dtype in DTYPES:
        for count in (0, 5, 9001):
            if rank == 0:
                for _ in range(size - 1):
                    out = xp.asarray(np.full(count, 99, dtype))
                    src = comm.recv(out, None, tag=2)
                    check.equal(host(out), data(dtype, count, src, 0), f"{dtype} x{count}")
            else:
                comm.send(xp.asarray(data(dtype, count, rank, 0)), 0, tag=2)
            comm.barrier()
    out = xp.asarray(np.zeros(70_000, np.float32))
    works = [comm.isend(xp.asarray(data(np.float32, 70_000, rank, nxt)), nxt),
             comm.irecv(out, prv)]
    check.true(works[1].wait() == prv and works[0].wait() is None, "ring: wait() results")
    check.equal(host(out), data(np.float32, 70_000, prv, rank), "ring")
    outs = [xp.asarray(np.zeros(3, np.int32)), xp.asarray(np.zeros(3, np.int32))]
    works = comm.batch([dpcore.P2POp("recv", outs[0], prv), dpcore.P2POp("recv", outs[1], nxt),
                        dpcore.P2POp("send", xp.asarray(data(np.int32, 3, rank, nxt)), nxt),
                        dpcore.P2POp("send", xp.asarray(data(np.int32, 3, rank, prv)), prv)])
    for w in works:
        w.wait()
    check.equal(host(outs[0]), data(np.int32, 3, prv, rank), "batch from the previous rank")
    check.equal(host(outs[1]), data(np.int32, 3, nxt, rank), "batch from the next rank")

check.finish()
comm.close()
