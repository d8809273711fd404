#!/usr/bin/env python3
"""Is algo="auto" as fast as the best fixed algorithm? Under mpiexec, per size: every algorithm
the communicator runs (one_shot where it fits, ring, direct where comm.direct) and auto, timed
in alternating blocks, and auto's time over the best fixed one's.

    mpiexec -n 2 python benchmarks/auto_vs_fixed.py                    # all_reduce, 1K-256M
    mpiexec -n 2 python benchmarks/auto_vs_fixed.py all_gather -e 64M

Blocks alternate (one_shot, ring, direct, auto, one_shot, ...) five times; each is ~50 ms of
back-to-back in-place calls and counts as the slowest rank's time; a row gives the medians.
auto's blocks include whatever its tuner spends on trying the other arm.
"""
import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import dpcore  # noqa: E402
from dpcore.bench.blocks import alternating_medians, block_iters  # noqa: E402
from dpcore.bench.options import parse_size  # noqa: E402


def calls(comm, coll, x, shard):
    """{algo: a call of coll on x in place} for algo in the candidates and auto."""
    run = {"all_reduce": lambda a: comm.all_reduce(x, out=x, algo=a),
           "reduce_scatter": lambda a: comm.reduce_scatter(x, out=shard, algo=a),
           "all_gather": lambda a: comm.all_gather(shard, out=x, algo=a),
           "broadcast": lambda a: comm.broadcast(x, algo=a)}[coll]
    algos = [a for a in comm.algorithms if a != "one_shot" or x.nbytes <= (256 << 10)]
    algos += ["direct"] if comm.direct else []
    return {a: (lambda a=a: run(a)) for a in algos + ["auto"]}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("collective", nargs="?", default="all_reduce",
                   choices=["all_reduce", "reduce_scatter", "all_gather", "broadcast"])
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1K"))
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("256M"))
    p.add_argument("--blocks", type=int, default=5)
    args = p.parse_args()
    world = MPI.COMM_WORLD
    with dpcore.init() as comm:
        if comm.rank == 0:
            print(f"{args.collective}, {comm.size} ranks, float32, in place: median us per call "
                  f"over {args.blocks} alternating blocks; auto / best = auto's time over the "
                  "best fixed algorithm's")
        header = None
        nbytes = args.minbytes
        while nbytes <= args.maxbytes:
            x = np.ones(nbytes // 4, np.float32)
            start, stop = dpcore.shard_range(x.size, comm.size, comm.rank)
            fns = calls(comm, args.collective, x, x[start:stop])
            med = alternating_medians(world, fns, block_iters(nbytes), args.blocks)
            med = {a: t * 1e6 for a, t in med.items()}
            best = min((a for a in med if a != "auto"), key=med.get)
            if comm.rank == 0:
                if header is None:
                    header = ["one_shot", "ring", "direct", "auto"]
                    print(f"{'size':>10} " + " ".join(f"{a:>10}" for a in header) +
                          f" {'best':>9} {'auto/best':>9}")
                cells = [f"{med[a]:10.2f}" if a in med else f"{'-':>10}" for a in header]
                print(f"{nbytes:>10} " + " ".join(cells) +
                      f" {best:>9} {med['auto'] / med[best]:9.3f}", flush=True)
            nbytes *= 4


if __name__ == "__main__":
    main()
