#!/usr/bin/env python3
"""How close can an all_reduce or all_gather come to this machine's limit? Under mpiexec, per
size, in alternating blocks of back-to-back calls:

    floor       every rank at once moves, in private memory, the bytes it must at least read
                and write. all_reduce in place reads its input once and writes its result over
                it: the floor rewrites S bytes in place. all_gather in place must write the
                (n-1)/n x S bytes its peers send it, read from elsewhere: the floor copies
                that many between two private buffers.
    stream      all_gather only: the floor's copy with streaming stores (_C.stream_copy),
                which do not read the destination first. Past the cache it moves each byte
                once each way, the least any all_gather can, so stream/MPI is about the most
                that any all_gather could gain (dpcore on comm.alloc buffers, which streams
                too, came out 4-7 % above it: docs/busbw.md)
    MPI         MPI's collective, in place
    dpcore      dpcore's, in place (algo="auto")
    alloc       dpcore's on comm.alloc buffers, which the peers map

The floor moves each of those bytes once, without crossing between cores, so no collective
beats it past the cache: dpcore/floor is the fraction of the limit that dpcore reaches (issue 2's
memory-bandwidth floor for all_reduce), floor/MPI the most that anything could gain over MPI.
busbw uses nccl-tests' factors, the floor's the collective's.

Why all_reduce's floor is not a copy: a copy into another buffer also reads each destination
line before it overwrites it (glibc's memcpy stores through the cache below
x86_non_temporal_threshold, 288 MiB here), so it moves 3 bytes for every 2 it counts, and an
all_reduce in place, which writes the lines it has just read, ran 1.45x faster than such a copy
(256 MiB, 2 ranks, the 110 ns state).

    mpiexec -n 2 python benchmarks/copy_floor.py all_reduce -b 16M     # 16 MiB - 256 MiB
    mpiexec -n 2 python benchmarks/copy_floor.py all_gather -b 64K -e 16M --blocks 7
    mpiexec -n 2 python benchmarks/copy_floor.py all_gather --one-buffer   # huge pages

Fresh buffers get 4 KiB pages below 4 MiB. From 4 MiB NumPy asks for huge pages, and the kernel
gives them to the 2 MiB-aligned part of the array (2 of 4 MiB, 14 of 16, 62 of 64 here, by
/proc/self/smaps_rollup). With --one-buffer the floor's buffers and MPI's and dpcore's
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
from dpcore.bench.devices import huge_page_buffer  # noqa: E402
from dpcore.bench.options import parse_size  # noqa: E402

COLUMNS = ("floor", "stream", "MPI", "dpcore", "alloc")
RATIOS = (("MPI", "floor"), ("floor", "MPI"), ("stream", "MPI"), ("dpcore", "floor"),
          ("dpcore", "MPI"), ("alloc", "MPI"))


def calls(coll, comm, world, x, shared, empty):
    """(busbw factor, {name: call}) for one size; empty(i, count, dtype) gives the floor's
    private buffers."""
    n = comm.size
    start, stop = dpcore.shard_range(x.size, n, comm.rank)
    if coll == "all_reduce":
        mine = empty(1, x.nbytes, np.uint8)
        return 2 * (n - 1) / n, {
            "floor": lambda: np.bitwise_not(mine, out=mine),
            "MPI": lambda: world.Allreduce(MPI.IN_PLACE, [x, MPI.FLOAT]),
            "dpcore": lambda: comm.all_reduce(x, out=x),
            "alloc": lambda: comm.all_reduce(shared, out=shared)}
    moved = (x.size - (stop - start)) * x.itemsize  # the peers' bytes
    src, dst = empty(1, moved, np.uint8), empty(2, moved, np.uint8)
    return (n - 1) / n, {
        "floor": lambda: np.copyto(dst, src),
        "stream": lambda: dpcore._C.stream_copy(dst, src),
        "MPI": lambda: world.Allgather(MPI.IN_PLACE, [x, MPI.FLOAT]),
        "dpcore": lambda: comm.all_gather(x[start:stop], out=x),
        "alloc": lambda: comm.all_gather(shared[start:stop], out=shared)}


def main(coll=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    if coll is None:
        p.add_argument("collective", choices=("all_reduce", "all_gather"))
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1M"))
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("256M"))
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--one-buffer", action="store_true",
                   help="buffers allocated once at -e's size, in huge pages")
    args = p.parse_args()
    coll = coll or args.collective
    empty = (_pool_fronts(args.maxbytes) if args.one_buffer
             else lambda i, count, dtype: np.ones(count, dtype))  # ones: every page touched
    world = MPI.COMM_WORLD
    with dpcore.init() as comm:
        columns = [c for c in COLUMNS if coll == "all_gather" or c != "stream"]
        ratios = [(a, b) for a, b in RATIOS if a in columns and b in columns]
        if comm.rank == 0:
            print(f"{coll}, {comm.size} ranks, float32, in place: busbw GB/s, medians of "
                  f"{args.blocks} alternating blocks")
            print(f"{'size':>10}" + "".join(f"{c:>8}" for c in columns) +
                  "".join(f"{a + '/' + b:>13}" for a, b in ratios))
        nbytes = args.minbytes
        while nbytes <= args.maxbytes:
            x = empty(0, nbytes // 4, np.float32)
            x[...] = 0  # all_reduce in place adds it up: zeros stay zeros
            shared = comm.alloc(x.size, np.float32)
            factor, fns = calls(coll, comm, world, x, shared, empty)
            med = alternating_medians(world, fns, block_iters(nbytes), args.blocks)
            bw = {k: nbytes * factor / t / 1e9 for k, t in med.items()}
            if comm.rank == 0:
                print(f"{nbytes:>10}" + "".join(f"{bw[c]:8.2f}" for c in columns) +
                      "".join(f"{bw[a] / bw[b]:13.2f}" for a, b in ratios), flush=True)
            nbytes *= 4


def _pool_fronts(maxbytes):
    """empty(i, count, dtype): the front of the i-th of three buffers of maxbytes, each from a
    2 MiB boundary (devices.huge_page_buffer)."""
    pools = [huge_page_buffer(maxbytes) for _ in range(3)]
    return lambda i, count, dtype: pools[i][:count * np.dtype(dtype).itemsize].view(dtype)


if __name__ == "__main__":
    main()
