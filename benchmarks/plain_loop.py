#!/usr/bin/env python3
"""A collective as a user's own loop meets it, dpcore's against MPI's in the same run:

    mpiexec -n 2 python benchmarks/plain_loop.py all_reduce -b 8 -e 4K
    mpiexec -n 2 python benchmarks/plain_loop.py all_reduce -b 8 -e 8 --skew-us 40
    mpiexec -n 4 python benchmarks/plain_loop.py all_gather -b 64K -e 16M
    mpiexec -n 2 python benchmarks/plain_loop.py reduce -b 8 -e 64M

Per size: fresh buffers, 3 warm-up calls, then a loop of timed calls with time.perf_counter
around it, as a user would write it: no settle calls for auto's tuner, no barrier between the
warm-up and the loop. The slowest rank's time per call is reported (a collective ends with its
last rank). MPI (mpi4py's Allreduce / Allgather / Reduce, to rank 0 as dpcore's) runs the same
loop on the same buffers right after or before (the order alternates by run), so both meet the
machine in the same state.

Every run makes a new communicator, so auto starts from scratch in each, as in a new program;
--runs R gives the medians of R runs and the range of their ratios (MPI's time / dpcore's).

--skew-us S: before every call (warm-up and timed), the last rank computes for a random 0-S
us (a busy loop; the same random sequence for dpcore and MPI), as the ranks of a training step
arrive apart. The cpu columns are rank 0's CPU time per call (every thread of the process),
which is what its waiting costs: rank 0 arrives first and waits for the late rank.

--alloc: dpcore's buffers come from comm.alloc, which every rank maps, so direct copies from
the peers' with a plain (streaming) copy instead of the kernel's; MPI keeps ordinary buffers.

Sizes are the whole buffer: all_reduce's and reduce's input, all_gather's output (nccl-tests'
size).
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import dpcore  # noqa: E402
from dpcore.bench.options import parse_size  # noqa: E402

WARMUP = 3


def sweep(minbytes, maxbytes, factor):
    """nccl-tests' sizes: minbytes, then times factor (at least 2), up to maxbytes."""
    sizes, nbytes = [], minbytes
    while nbytes <= maxbytes:
        sizes.append(nbytes)
        nbytes *= max(factor, 2)
    return sizes


def iters_for(nbytes, most):
    """Timed calls per loop: `most`, fewer for large sizes (about 1 GiB per loop, at least 10)."""
    return max(10, min(most, (1 << 30) // max(nbytes, 1)))


def skewer(late, skew_us, seed):
    """A function to call before each collective: on the late rank a busy 0-skew_us us."""
    if not late or skew_us <= 0:
        return lambda: None
    rng = np.random.default_rng(seed)

    def busy():
        until = time.perf_counter() + rng.uniform(0, skew_us) * 1e-6
        while time.perf_counter() < until:
            pass
    return busy


def loop(call, iters, skew_us, late, seed):
    """(seconds per call, CPU seconds per call) of this rank over `iters` calls after WARMUP."""
    before = skewer(late, skew_us, seed)
    for _ in range(WARMUP):
        before()
        call()
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(iters):
        before()
        call()
    wall = time.perf_counter() - start
    return wall / iters, (time.process_time() - cpu) / iters


def calls(coll, comm, world, nbytes, in_place, alloc):
    """{"dpcore": fn, "MPI": fn} on buffers of nbytes (the whole buffer): the same ones, or with
    alloc, dpcore's from comm.alloc and MPI's ordinary ones."""
    n, rank = comm.size, comm.rank
    count = max(nbytes // 4, n if coll == "all_gather" else 1)
    if coll == "all_gather":
        count -= count % n  # MPI's Allgather wants equal shards
    start, stop = rank * count // n, (rank + 1) * count // n

    def shared(k):
        a = comm.alloc(k, np.float32)  # collective: the same k on every rank
        a[...] = 1
        return a

    def buffers(ones):
        """(send, recv) in this placement, each buffer made by ones(count)."""
        recv = ones(count)
        send = recv if in_place else ones(count)
        return (send[start:stop], recv) if coll == "all_gather" else (send, recv)

    send, recv = buffers(shared if alloc else lambda k: np.ones(k, np.float32))
    mpi_send, mpi_recv = buffers(lambda k: np.ones(k, np.float32)) if alloc else (send, recv)
    if coll == "reduce":  # to rank 0: the others have no output
        out, mpi_out = (recv, mpi_recv) if rank == 0 else (None, None)
        mpi_send = MPI.IN_PLACE if in_place and rank == 0 else mpi_send
        return {"dpcore": lambda: comm.reduce(send, out=out),
                "MPI": lambda: world.Reduce(mpi_send, mpi_out, root=0)}
    mpi_send = MPI.IN_PLACE if in_place else mpi_send
    ours, theirs = ((comm.all_reduce, world.Allreduce) if coll == "all_reduce" else
                    (comm.all_gather, world.Allgather))
    return {"dpcore": lambda: ours(send, out=recv), "MPI": lambda: theirs(mpi_send, mpi_recv)}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("collective", choices=("all_reduce", "all_gather", "reduce"))
    p.add_argument("-b", "--minbytes", type=parse_size, default=8)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("4K"))
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("--iters", type=int, default=200, help="timed calls per loop, at most")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--skew-us", type=float, default=0.0,
                   help="the last rank computes a random 0-SKEW_US us before every call")
    p.add_argument("--in-place", action="store_true", help="default: out of place")
    p.add_argument("--alloc", action="store_true",
                   help="dpcore's buffers from comm.alloc, which the peers map (MPI's stay "
                        "ordinary: it is faster on them)")
    args = p.parse_args()
    world = MPI.COMM_WORLD
    n, rank = world.Get_size(), world.Get_rank()
    late = rank == n - 1 and n > 1
    sizes = sweep(args.minbytes, args.maxbytes, args.stepfactor)
    found = {s: {"dpcore": [], "MPI": [], "dpcore cpu": [], "MPI cpu": [], "algos": []}
             for s in sizes}
    for run in range(args.runs):
        with dpcore.init() as comm:
            for nbytes in sizes:
                fns = calls(args.collective, comm, world, nbytes, args.in_place, args.alloc)
                order = ("dpcore", "MPI") if run % 2 == 0 else ("MPI", "dpcore")
                iters = iters_for(nbytes, args.iters)
                before = comm.algorithm_calls()
                for name in order:
                    world.Barrier()
                    wall, cpu = loop(fns[name], iters, args.skew_us, late, seed=run)
                    found[nbytes][name].append(world.allreduce(wall, op=MPI.MAX))
                    found[nbytes][name + " cpu"].append(cpu)
                ran = {a: k - before.get(a, 0) for a, k in comm.algorithm_calls().items()}
                found[nbytes]["algos"].append({a: k for a, k in ran.items() if k})
    if rank != 0:
        return
    skew = f", rank {n - 1} late by 0-{args.skew_us:g} us" if args.skew_us > 0 else ""
    print(f"{args.collective}, {n} ranks, float32, "
          f"{'in place' if args.in_place else 'out of place'}"
          f"{', dpcore on comm.alloc buffers' if args.alloc else ''}{skew}: a plain loop "
          f"({WARMUP} warm-up calls, then up to {args.iters} timed), us per call, medians of "
          f"{args.runs} runs; ratio = MPI / dpcore; cpu = rank 0's CPU us per call")
    print(f"{'size':>10} {'dpcore':>10} {'MPI':>10} {'ratio':>6} {'ratio range':>12} "
          f"{'cpu':>7} {'MPI cpu':>7}  algorithms (dpcore, every run)")
    for nbytes in sizes:
        f = found[nbytes]
        ratios = [m / d for d, m in zip(f["dpcore"], f["MPI"])]
        algos = "; ".join(" ".join(f"{a} {k}" for a, k in sorted(r.items())) for r in f["algos"])
        print(f"{nbytes:>10} {statistics.median(f['dpcore']) * 1e6:>10.2f} "
              f"{statistics.median(f['MPI']) * 1e6:>10.2f} {statistics.median(ratios):>6.2f} "
              f"{min(ratios):>5.2f}-{max(ratios):<6.2f} "
              f"{statistics.median(f['dpcore cpu']) * 1e6:>7.1f} "
              f"{statistics.median(f['MPI cpu']) * 1e6:>7.1f}  {algos}", flush=True)


if __name__ == "__main__":
    main()
