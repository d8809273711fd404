#!/usr/bin/env python3
"""`benchmarks/copy_floor.py all_gather` under the name the earlier results use, e.g.

    mpiexec -n 2 python benchmarks/all_gather_floor.py --one-buffer -b 256K -e 64M

Same flags as copy_floor.py (-b -e --blocks --one-buffer).
"""
from copy_floor import main

if __name__ == "__main__":
    main("all_gather")
