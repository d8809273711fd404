#!/usr/bin/env python3
"""nccl-tests' reduce_perf on dpcore, e.g.

    mpiexec -n 2 python benchmarks/reduce_perf.py -b 8 -e 1M --compare mpi

Same flags as `python -m dpcore.bench reduce` (-b -e -f -n -w -c -d -o -r -a, --compare mpi,
--repeat, --json); the harness is dpcore/bench/harness.py.
"""
from dpcore.bench import run

if __name__ == "__main__":
    run(collective="reduce")
