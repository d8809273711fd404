#!/usr/bin/env python3
"""nccl-tests' all_gather_perf on dpcore, e.g.

    mpiexec -n 2 python benchmarks/all_gather_perf.py -b 8 -e 1M --compare mpi

Same flags as `python -m dpcore.bench all_gather` (-b -e -f -n -w -c -d -o -r -a, --compare mpi,
--repeat, --json); the harness is dpcore/bench/harness.py.
"""
from dpcore.bench import run

if __name__ == "__main__":
    run(collective="all_gather")
