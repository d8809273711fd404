#!/usr/bin/env python3
"""gather, scatter and all_to_all as a user's own loop meets them, dpcore's against MPI's
(mpi4py's Gatherv, Scatterv, Alltoall) in the same run, as plain_loop.py does the others:

    mpiexec -n 2 python benchmarks/exchange_loop.py all_to_all -b 8 -e 64M
    mpiexec -n 2 python benchmarks/exchange_loop.py all_to_all -b 64K -e 4M --alloc
    mpiexec -n 2 python benchmarks/exchange_loop.py gather -b 8 -e 64M
    mpiexec -n 2 python benchmarks/exchange_loop.py scatter -b 8 -e 64M --list

Per size: fresh buffers, plain_loop.loop's warm-up and timed loop; the slowest rank's time per
call; medians of --runs runs, each with a new communicator; ratio = MPI's time / dpcore's. Sizes
are nccl-tests': all_to_all's input per rank, gather's output and scatter's input at the root.
--alloc: dpcore's buffers from comm.alloc (the peers read them with a plain copy); MPI's stay
ordinary. --list: dpcore's scatter root passes one array per rank, MPI's Scatterv one buffer.
Root 0, float32, equal shards.
"""
import argparse
import statistics

import numpy as np
from mpi4py import MPI

import dpcore
from dpcore.bench.options import parse_size
from plain_loop import WARMUP, iters_for, loop, sweep


def calls(coll, comm, world, nbytes, alloc, pieces=False):
    """{"dpcore": fn, "MPI": fn} over buffers of nbytes (the whole buffer); pieces: dpcore's
    scatter from a list of one array per rank (MPI's Scatterv has one buffer)."""
    n, rank = comm.size, comm.rank
    shard = max(nbytes // 4 // n, 1)
    count = shard * n

    def ones(k, ours=True):
        if not (alloc and ours):
            return np.ones(k, np.float32)
        a = comm.alloc(k, np.float32)  # collective: the same k on every rank
        a[...] = 1
        return a

    if coll == "all_to_all":
        x, out, mx, mout = ones(count), ones(count), ones(count, False), ones(count, False)
        return {"dpcore": lambda: comm.all_to_all(x, out=out),
                "MPI": lambda: world.Alltoall(mx, mout)}
    whole, part, mpi_whole, mpi_part = ones(count), ones(shard), ones(count, False), ones(
        shard, False)
    counts, root = [shard] * n, rank == 0
    if coll == "gather":
        return {"dpcore": lambda: comm.gather(part, out=whole if root else None),
                "MPI": lambda: world.Gatherv(mpi_part, [mpi_whole, counts] if root else None)}
    if pieces:
        xs = [ones(shard) for _ in range(n)]
        return {"dpcore": lambda: comm.scatter(xs if root else None, part),
                "MPI": lambda: world.Scatterv([mpi_whole, counts] if root else None, mpi_part)}
    return {"dpcore": lambda: comm.scatter(whole if root else None, part),
            "MPI": lambda: world.Scatterv([mpi_whole, counts] if root else None, mpi_part)}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("collective", choices=("all_to_all", "gather", "scatter"))
    p.add_argument("-b", "--minbytes", type=parse_size, default=8)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("64M"))
    p.add_argument("-f", "--stepfactor", type=int, default=8)
    p.add_argument("--iters", type=int, default=200, help="timed calls per loop, at most")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--alloc", action="store_true", help="dpcore's buffers from comm.alloc")
    p.add_argument("--list", action="store_true",
                   help="scatter: dpcore's root passes a list of one array per rank")
    args = p.parse_args()
    world = MPI.COMM_WORLD
    sizes = sweep(args.minbytes, args.maxbytes, args.stepfactor)
    found = {s: {"dpcore": [], "MPI": [], "algos": []} for s in sizes}
    for run in range(args.runs):
        with dpcore.init() as comm:
            for nbytes in sizes:
                fns = calls(args.collective, comm, world, nbytes, args.alloc, args.list)
                before = comm.algorithm_calls()
                for name in ("dpcore", "MPI") if run % 2 == 0 else ("MPI", "dpcore"):
                    world.Barrier()
                    wall, _ = loop(fns[name], iters_for(nbytes, args.iters), 0, False, run)
                    found[nbytes][name].append(world.allreduce(wall, op=MPI.MAX))
                ran = {a: k - before.get(a, 0) for a, k in comm.algorithm_calls().items()}
                found[nbytes]["algos"].append(" ".join(f"{a} {k}" for a, k in ran.items() if k))
    if world.rank != 0:
        return
    print(f"{args.collective}, {world.size} ranks, float32, root 0"
          f"{', dpcore on comm.alloc buffers' if args.alloc else ''}"
          f"{', dpcore from a list' if args.list else ''}: a plain loop ({WARMUP} "
          f"warm-up calls, then up to {args.iters} timed), us per call, medians of {args.runs} "
          f"runs; ratio = MPI / dpcore")
    print(f"{'size':>10} {'dpcore':>10} {'MPI':>10} {'ratio':>6} {'ratio range':>12}  "
          f"algorithms (dpcore, first run)")
    for nbytes in sizes:
        f = found[nbytes]
        ratios = [m / d for d, m in zip(f["dpcore"], f["MPI"])]
        print(f"{nbytes:>10} {statistics.median(f['dpcore']) * 1e6:>10.2f} "
              f"{statistics.median(f['MPI']) * 1e6:>10.2f} {statistics.median(ratios):>6.2f} "
              f"{min(ratios):>5.2f}-{max(ratios):<6.2f}  {f['algos'][0]}", flush=True)


if __name__ == "__main__":
    main()
