"""nccl-tests style benchmark: `mpiexec -n N python -m dpcore.bench all_reduce --compare mpi`.

harness.py is the one harness (buffers, timing, checking), options.py its flags, table.py its
rows, cli.py the entry point; collectives.py holds each collective's hooks. See
`python -m dpcore.bench -h` for the flags (nccl-tests' -b -e -f -n -w -c -d -o -r, plus -a ALGO,
--compare mpi, --repeat, --json).
"""
from .cli import main, run

__all__ = ["main", "run"]
