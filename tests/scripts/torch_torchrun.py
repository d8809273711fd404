"""The backend as torchrun starts it: env://, no MPI in the job, so dpcore bootstraps through
torch's store. A few of torch's collectives, checked exactly; MPI never imported. Under plain
mpiexec the same program runs too: `import dpcore.torch` sets what env:// reads from MPI.

Usage: python -m torch.distributed.run --standalone --nproc-per-node N torch_torchrun.py
       mpiexec -n N python torch_torchrun.py
"""
import os
import sys

import torch
import torch.distributed as dist

import dpcore.torch  # noqa: F401  (registers "dpcore")

dist.init_process_group("dpcore")
rank, n = dist.get_rank(), dist.get_world_size()
failures = []

t = torch.arange(6.0) + rank
dist.all_reduce(t)
if not torch.equal(t, n * torch.arange(6.0) + n * (n - 1) / 2):
    failures.append(f"all_reduce gave {t}")

shard = torch.full((3,), float(rank))
gathered = torch.empty(3 * n)
dist.all_gather_into_tensor(gathered, shard)
if not torch.equal(gathered, torch.arange(n).repeat_interleave(3).float()):
    failures.append(f"all_gather_into_tensor gave {gathered}")

mine = torch.empty(2)
dist.reduce_scatter_tensor(mine, torch.arange(2.0 * n) * (rank + 1), op=dist.ReduceOp.AVG)
expected = torch.arange(2.0 * rank, 2.0 * rank + 2) * (n + 1) / 2
if not torch.equal(mine, expected):
    failures.append(f"reduce_scatter_tensor AVG gave {mine}, expected {expected}")

if "mpi4py" in sys.modules and "PMI_RANK" not in os.environ:
    failures.append("mpi4py was imported")
dist.destroy_process_group()
if "mpi4py.MPI" in sys.modules:  # under mpiexec: os._exit skips MPI_Finalize, which unlinks them
    from fault_kit import mpi_shm_segments

    print(f"rank {rank}: mpi shm {mpi_shm_segments()}", flush=True)
print(f"rank {rank}: " + ("; ".join(failures) or "ok"), flush=True)
os._exit(1 if failures else 0)
