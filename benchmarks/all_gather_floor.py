#!/usr/bin/env python3
"""How close can any all_gather come to this machine's limit? Under mpiexec, per size, in
alternating blocks of back-to-back calls:

    copy        every rank at once copies (n-1)/n x S bytes between two private buffers
    MPI         MPI_Allgather in place
    dpcore      comm.all_gather in place (algo="auto")
    alloc       the same on comm.alloc buffers, which the peers map: one plain copy

An all_gather in place must put the (n-1)/n x S bytes of its peers into each rank's buffer: each
of them read once and written once, at best, which is what `copy` does without crossing
between cores, so no all_gather beats it. busbw of all three is (n-1)/n x S / time, nccl-tests'
all_gather factor; `MPI/copy` is how much of that limit MPI already reaches, and `copy/MPI` the
most that anything could gain over MPI.

    mpiexec -n 2 python benchmarks/all_gather_floor.py              # 1 MiB - 256 MiB
    mpiexec -n 2 python benchmarks/all_gather_floor.py -b 64K -e 16M --blocks 7
    mpiexec -n 2 python benchmarks/all_gather_floor.py --one-buffer    # huge pages, see below

Fresh buffers get 4 KiB pages. With --one-buffer the copy's two buffers and MPI's and dpcore's
are the fronts of buffers allocated once at -e's size from a 2 MiB boundary (as the bench's
--one-buffer): NumPy asks for huge pages for them, and the kernel copies that MPI and direct
make run 2-3x faster on those. comm.alloc's buffers have 4 KiB pages either way.
"""
import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import dpcore  # noqa: E402
from dpcore.bench.blocks import alternating_medians, block_iters  # noqa: E402
from dpcore.bench.harness import parse_size  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1M"))
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("256M"))
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--one-buffer", action="store_true",
                   help="buffers allocated once at -e's size, in huge pages")
    args = p.parse_args()
    empty = (_pool_fronts(args.maxbytes) if args.one_buffer
             else lambda i, count, dtype: np.ones(count, dtype))
    world = MPI.COMM_WORLD
    with dpcore.init() as comm:
        n = comm.size
        if comm.rank == 0:
            print(f"all_gather, {n} ranks, float32, in place: busbw GB/s, medians of "
                  f"{args.blocks} alternating blocks")
            print(f"{'size':>10} {'copy':>8} {'MPI':>8} {'dpcore':>8} {'alloc':>8} "
                  f"{'MPI/copy':>9} {'copy/MPI':>9} {'dpcore/MPI':>11} {'alloc/MPI':>10}")
        nbytes = args.minbytes
        while nbytes <= args.maxbytes:
            x = empty(0, nbytes // 4, np.float32)
            start, stop = dpcore.shard_range(x.size, n, comm.rank)
            moved = (x.size - (stop - start)) * 4  # the peers' bytes this rank receives
            src = empty(1, moved, np.uint8)
            dst = empty(2, moved, np.uint8)
            shared = comm.alloc(x.size, np.float32)
            fns = {"copy": lambda: np.copyto(dst, src),
                   "MPI": lambda: world.Allgather(MPI.IN_PLACE, [x, MPI.FLOAT]),
                   "dpcore": lambda: comm.all_gather(x[start:stop], out=x),
                   "alloc": lambda: comm.all_gather(shared[start:stop], out=shared)}
            med = alternating_medians(world, fns, block_iters(nbytes), args.blocks)
            bw = {k: nbytes * (n - 1) / n / t / 1e9 for k, t in med.items()}
            if comm.rank == 0:
                print(f"{nbytes:>10} {bw['copy']:8.2f} {bw['MPI']:8.2f} {bw['dpcore']:8.2f} "
                      f"{bw['alloc']:8.2f} {bw['MPI'] / bw['copy']:9.2f} "
                      f"{bw['copy'] / bw['MPI']:9.2f} {bw['dpcore'] / bw['MPI']:11.2f} "
                      f"{bw['alloc'] / bw['MPI']:10.2f}", flush=True)
            nbytes *= 4


def _pool_fronts(maxbytes):
    """empty(i, count, dtype): the front of the i-th of three buffers of maxbytes, each from a
    2 MiB boundary so that its front can sit in one huge page."""
    huge, pools = 2 << 20, []
    for _ in range(3):
        raw = np.ones(maxbytes + huge, np.uint8)
        start = -raw.ctypes.data % huge
        pools.append(raw[start:start + maxbytes])
    return lambda i, count, dtype: pools[i][:count * np.dtype(dtype).itemsize].view(dtype)


if __name__ == "__main__":
    main()
