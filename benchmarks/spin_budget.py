#!/usr/bin/env python3
"""How long should a waiting rank poll before it sleeps (DPCORE_SPIN_US)? One job makes a
communicator per budget and times the same loop (plain_loop.py's: 3 warm-up calls, then
--iters timed, optionally with a late rank) on each and on MPI, in alternating rounds:

    mpiexec -n 2 python benchmarks/spin_budget.py --skew-us 40     # ranks 0-40 us apart
    mpiexec -n 2 python benchmarks/spin_budget.py --busy 1         # beside one busy process

A row: the budget, the median over --rounds of the slowest rank's us per call, the median of
the rounds' ratios (MPI's time / this one's), and rank 0's CPU us per call: what its waiting
costs (every thread of the process). --busy N starts N processes that only compute, as another
program on the machine would, for the whole run: where they hold a core the peer a rank polls
for may not be running, and polling only keeps the peer off this rank's core.
"""
import argparse
import os
import statistics
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import dpcore  # noqa: E402
from dpcore.bench.options import parse_size  # noqa: E402
from plain_loop import loop  # noqa: E402  (benchmarks/ is the script's own folder)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spin-us", default="0,20,50,100,200", help="budgets to compare, in us")
    p.add_argument("-b", "--bytes", type=parse_size, default=8, help="all_reduce size")
    p.add_argument("--skew-us", type=float, default=0.0,
                   help="the last rank computes a random 0-SKEW_US us before every call")
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--busy", type=int, default=0, help="busy processes beside the job")
    args = p.parse_args()
    world = MPI.COMM_WORLD
    n, rank = world.Get_size(), world.Get_rank()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy if rank == 0 else 0)]
    try:
        comms = {}
        for us in args.spin_us.split(","):
            os.environ["DPCORE_SPIN_US"] = us  # read by the communicator's settings, at init
            comms[f"{float(us):g} us"] = dpcore.init()
        x = np.ones(max(args.bytes // 4, 1), np.float32)
        y = np.empty_like(x)
        calls = {"MPI": lambda: world.Allreduce(x, y)}
        calls.update({name: (lambda c=c: c.all_reduce(x, out=y)) for name, c in comms.items()})
        wall = {name: [] for name in calls}
        cpu = {name: [] for name in calls}
        late = rank == n - 1 and n > 1
        for r in range(args.rounds):
            for name, fn in calls.items():
                world.Barrier()
                t, c = loop(fn, args.iters, args.skew_us, late, seed=r)
                wall[name].append(world.allreduce(t, op=MPI.MAX))
                cpu[name].append(c)
        for c in comms.values():
            c.close()
    finally:
        for b in busy:
            b.kill()
            b.wait()
    if rank == 0:
        print(f"all_reduce of {args.bytes} B, {n} ranks, rank {n - 1} late by 0-{args.skew_us:g} us"
              f", {args.busy} busy processes beside: us per call (medians of {args.rounds} rounds"
              f" of {args.iters}), ratio = MPI / it, cpu = rank 0's CPU us per call")
        print(f"{'spin':>10} {'us':>9} {'ratio':>6} {'cpu':>7}")
        for name in calls:
            ratios = [m / t for m, t in zip(wall["MPI"], wall[name])]
            print(f"{name:>10} {statistics.median(wall[name]) * 1e6:>9.2f} "
                  f"{statistics.median(ratios):>6.2f} {statistics.median(cpu[name]) * 1e6:>7.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
