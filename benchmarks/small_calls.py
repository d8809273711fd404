#!/usr/bin/env python3
"""What one small collective costs, as a loop of back-to-back calls sees it: barrier, an 8-byte
broadcast and an 8-byte all_reduce in place, dpcore's against MPI's, in alternating blocks of
the same run (medians of --blocks). Most telling where the ranks outnumber the cores:

    mpiexec -n 4 python benchmarks/small_calls.py      # 4 ranks on this machine's 2 cores

Every dpcore call waits until every rank has posted its call (so each rank can check the
others' and raise CommError on a mismatch): about one of dpcore's barriers each. MPI_Bcast's
root does not wait for the receivers, so MPI's broadcast costs less than MPI's barrier. Where
two ranks share a core, each rank's Python in front of a call costs about three times what it
costs alone (benchmarks/results/2026-12-01-cpu.md, "Night").
"""
import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import dpcore  # noqa: E402
from dpcore.bench.blocks import alternating_medians  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=2000, help="calls per block")
    p.add_argument("--blocks", type=int, default=3)
    args = p.parse_args()
    world = MPI.COMM_WORLD
    with dpcore.init() as comm:
        x = np.ones(2, np.float32)  # 8 bytes
        calls = {"barrier": comm.barrier,
                 "MPI barrier": world.Barrier,
                 "broadcast": lambda: comm.broadcast(x),
                 "MPI broadcast": lambda: world.Bcast(x),
                 "all_reduce": lambda: comm.all_reduce(x, out=x),
                 "MPI all_reduce": lambda: world.Allreduce(MPI.IN_PLACE, x)}
        med = alternating_medians(world, calls, args.iters, args.blocks)
        if comm.rank == 0:
            print(f"{comm.size} ranks, us per call (medians of {args.blocks} blocks of "
                  f"{args.iters})")
            for name in ("barrier", "broadcast", "all_reduce"):
                ours, theirs = med[name], med["MPI " + name]
                print(f"{name:>11} {ours * 1e6:8.2f}   MPI {theirs * 1e6:8.2f}   "
                      f"ratio {theirs / ours:5.2f}")


if __name__ == "__main__":
    main()
