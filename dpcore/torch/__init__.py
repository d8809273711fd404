"""dpcore as a torch.distributed backend: `import dpcore.torch` registers "dpcore", for CPU and
CUDA tensors, so that `dist.init_process_group("dpcore", ...)` and
`dist.new_group(backend="dpcore")` run torch's own collectives, DistributedDataParallel and FSDP
on dpcore's (on CUDA tensors: dpcore's kernels, ordered on torch's current stream).

How, and why so:

- A Python subclass of torch.distributed.ProcessGroup (process_group.py), not a C++ backend.
  torch's own Python wrapper and the trampoline into a Python group cost about 15 us a call
  here, and this backend's Python about 8 (dpcore's call itself 2-4): less than a CPU gloo
  call between two processes already costs, so the targets (a 4-byte all_reduce in a fifth of
  gloo's time, twice its bus bandwidth from 1 MiB) come within reach without a second compiled
  module built against torch's headers, which would tie dpcore's build to one torch version.
  benchmarks/torch_backend.py measures it (benchmarks/results/2026-12-02-torch.md).
- Under mpiexec, with any init_method, the communicator is made over MPI and ordered by
  torch's ranks; without MPI in the job, through the group's store (connect.py).
- Threads: a dpcore communicator takes calls only from the thread that created it (a second
  thread would order collectives differently on different ranks). torch calls the backend
  from the thread that runs the collective, and for CPU tensors autograd runs backward (and so
  DDP's and FSDP's hooks) on the thread that called backward(), so the group is used from the
  thread that made it. A CUDA backward runs on autograd's own thread while backward()'s caller
  waits: the group lends its communicator to a thread inside a backward pass. Async calls
  run on dpcore's own worker thread while that thread computes; one completion thread per
  group completes their futures (work.py), so `.then()` callbacks run there, and a
  collective issued from such a callback is refused with a RuntimeError.
- Errors stay dpcore's: a mismatched call, a dead peer or a stall raises dpcore.CommError on
  every rank, from the call itself or from Work.wait(). A future in error state holds torch's
  RuntimeError (torch lets Python fail a future only through a callback), so the future's
  wait() and DDP's backward() raise "Got the following error when running the callback:
  CommError: dpcore ...", one line (work.py). Tensors keep their dtype in broadcast and
  all_gather where dpcore has it, so ranks that pass different dtypes fail alike; new_group's
  members are compared at its init (connect.py).
"""
import torch.distributed as dist

from .connect import fill_env_from_launcher
from .process_group import ProcessGroup, create

fill_env_from_launcher()  # env:// under mpiexec, as under torchrun

if "DPCORE" not in dist.Backend._plugins:
    dist.Backend.register_backend("dpcore", create, extended_api=True, devices=["cpu", "cuda"])

__all__ = ["ProcessGroup"]
