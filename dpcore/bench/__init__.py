"""nccl-tests style benchmark: `mpiexec -n N python -m dpcore.bench all_reduce --compare mpi`.

harness.py is the one harness (buffers, timing, checking), options.py its flags, table.py its
rows, cli.py the entry point; collectives.py holds each collective's hooks (and sendrecv's),
patterns.py their exact inputs, devices.py where the buffers live (host or GPU), compare.py what
runs beside dpcore (MPI, NCCL: their names for types and ops), floor.py the copy floor's bytes,
outputs.py --json and --csv, gpu_only.py the nccl-tests flags it refuses. See
`python -m dpcore.bench -h` for the flags (nccl-tests' -b -e -f -i -n -m -w -N -c -d -o -r -z -T
-C -a -J, plus --algo, --device cuda, --compare mpi|nccl, --floor, --repeat, --json, --csv).
"""
from .cli import main, run

__all__ = ["main", "run"]
