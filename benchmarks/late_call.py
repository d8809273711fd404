#!/usr/bin/env python3
"""Where a late rank's own call goes: the critical path of a plain loop whose ranks arrive apart.

    mpiexec -n 2 python benchmarks/late_call.py
    mpiexec -n 2 python benchmarks/late_call.py --bytes 4096 --runs 5

In `plain_loop.py reduce --skew-us 40` the last rank computes for a random 0-40 us before every
call, so the root is always there first and waits. The loop then runs at the late rank's pace:
its compute, then its own call, then its compute again. Whatever that call costs is on the
loop's critical path; nothing else is. This times that call alone (rank 1, 8 bytes of float32
by default), dpcore's reduce to rank 0 beside mpi4py's Reduce. A user's call takes the plain
call's compiled entry (dpcore/comm/plain.py); the other lines time the layers of the full
checks' path, which it replaced for such calls, each by calling it with what the layer above
passes:

  run       the bindings' Backend.run: pybind11's dispatch, then the C++ call (the header
            exchange, the payload copied into its one-shot slot)
  _launch   + the communicator's _launch (the owner-thread check, the failure bookkeeping)
  choose    + auto's algorithm choice (dpcore/comm/choice.py)
  entry     the plain call's entry alone: its checks, auto's choice and the C++ call, compiled
  reduce    comm.reduce: what a user's call costs (the entry, behind one Python frame)

Medians over the timed calls of each run (the first tenth left out), one line per layer with
every run's median; the layers and MPI take turns within a run. Private names (_host,
_launch, _plain) are used on purpose: this is a probe of the call path, not a user's program.
"""
import argparse
import os
import random
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import dpcore  # noqa: E402
from dpcore.comm.choice import choose, reduction  # noqa: E402
from dpcore.dtypes import REDUCE  # noqa: E402


def spin(us):
    """Computes for `us` microseconds, as the late rank's share of a training step."""
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=int, default=8, help="the reduce's size (float32)")
    parser.add_argument("--calls", type=int, default=3000, help="timed calls per layer per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skew-us", type=float, default=40)
    args = parser.parse_args()

    world = MPI.COMM_WORLD
    comm = dpcore.init()
    late = comm.size - 1
    x = np.ones(max(args.bytes // 4, 1), np.float32)
    out = np.empty_like(x) if comm.rank == 0 else None
    path = comm._host
    dtype, op = reduction(x.dtype, "sum")
    algo = choose("auto", "reduce", x.nbytes, path.rules)
    layers = {
        "run": lambda: path.run(REDUCE, dtype, op, 0, algo, x, out, x.size, x.size, 0),
        "_launch": lambda: comm._launch(path, REDUCE, dtype, op, 0, algo, x, out, x.size,
                                        x.size, out, False),
        "choose": lambda: comm._launch(path, REDUCE, dtype, op, 0,
                                       choose("auto", "reduce", x.nbytes, path.rules), x, out,
                                       x.size, x.size, out, False),
        "entry": lambda: comm._plain(REDUCE, x, out, 0, "sum", "auto", False),
        "reduce": lambda: comm.reduce(x, 0, out=out),
        "MPI": lambda: world.Reduce(x, out, root=0),
    }
    medians = {name: [] for name in layers}
    for _ in range(args.runs):
        for name, call in layers.items():
            rng = random.Random(1)  # the same lateness for every layer
            times = []
            for _ in range(args.calls):
                if comm.rank == late:
                    spin(rng.uniform(0, args.skew_us))
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            medians[name].append(float(np.median(times[args.calls // 10:])) * 1e6)
    if comm.rank == late:
        print(f"rank {late}'s own call, late by 0-{args.skew_us:g} us, of a reduce of {x.nbytes} "
              f"bytes to rank 0 on {comm.size} ranks: us, the median of each of {args.runs} runs")
        for name, values in medians.items():
            print(f"  {name:8s} " + " ".join(f"{v:6.2f}" for v in values), flush=True)
    comm.close()


if __name__ == "__main__":
    main()
