"""The torch backend "dpcore" on CUDA tensors, against gloo in the same job (a GPU only: run by
tests/gpu/device_check.sh's torch-cuda step; torch's CPU-only build has no CUDA tensors):

  collectives  all_reduce of float16, bfloat16 and float32 tensors (odd counts included),
               broadcast, all_gather_into_tensor and reduce_scatter_tensor, async too: bit for
               bit as gloo's on the same data (exact integer inputs)
  stream       a call that follows a fill queued behind a long kernel on a side stream made
               current: the call runs on torch's current stream, after the fill
  ddp          DistributedDataParallel on CUDA (its hooks run on autograd's own thread) and
               with no_sync, step by step as on gloo (2 ranks: float32 sums of two terms are
               alike in either order)

Usage: mpiexec -n K python -m mpi4py torch_cuda.py
"""
import torch
import torch.distributed as dist
from mpi4py import MPI

import torch_training as train
from checks import Checker, say
from torch_kit import same, start, tensor

world = MPI.COMM_WORLD
torch.cuda.set_device(world.rank % torch.cuda.device_count())
rank, size, gloo = start("env", world)
check = Checker(rank)
cuda = torch.device("cuda", torch.cuda.current_device())


def on_gloo(call, *tensors):
    """call(*tensors, group=gloo) on CPU copies of CUDA tensors; the copies, after it."""
    copies = [t.cpu() for t in tensors]
    call(*copies, group=gloo)
    return copies


def check_collectives():
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for count in (1, 1001, 100_003):
            t = tensor(dtype, count, rank, size).to(cuda)
            want, = on_gloo(dist.all_reduce, t)
            dist.all_reduce(t)
            same(check, t.cpu(), want, f"all_reduce {dtype} x{count}")
    t = tensor(torch.float32, 4099, rank, size).to(cuda)
    want, = on_gloo(lambda x, group: dist.broadcast(x, src=size - 1, group=group), t)
    dist.broadcast(t, src=size - 1)
    same(check, t.cpu(), want, "broadcast")
    out = torch.empty(size * 4099, device=cuda)
    want_out, _ = on_gloo(dist.all_gather_into_tensor, out, t)
    dist.all_gather_into_tensor(out, t)
    same(check, out.cpu(), want_out, "all_gather_into_tensor")
    x = tensor(torch.float32, size * 1000, rank, size).to(cuda)
    shard = torch.empty(1000, device=cuda)
    want_shard, _ = on_gloo(dist.reduce_scatter_tensor, shard, x)
    dist.reduce_scatter_tensor(shard, x)
    same(check, shard.cpu(), want_shard, "reduce_scatter_tensor")
    t = tensor(torch.float32, 1 << 20, rank, size).to(cuda)
    want, = on_gloo(dist.all_reduce, t)
    dist.all_reduce(t, async_op=True).wait()
    same(check, t.cpu(), want, "async all_reduce")


def check_stream():
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.zeros(1 << 24, device=cuda)
        torch.cuda._sleep(50_000_000)  # some tens of ms of GPU time before the fill
        t.fill_(rank + 1)
        dist.all_reduce(t)
    side.synchronize()
    check.true(bool((t == size * (size + 1) // 2).all()), "all_reduce after a fill queued on "
                                                           "the current side stream")


class CudaSetup(train.Setup):
    """torch_training's model and data on this rank's GPU."""

    def model(self):
        return super().model().to(cuda)

    def batch(self, step):
        return super().batch(step).to(cuda)

    def loss(self, out):
        return super().loss(out.cpu())  # its weights are CPU tensors


def check_ddp():
    setup = CudaSetup(rank, size)
    for name, kwargs in {"plain": {}, "no_sync": {"accumulate": True}}.items():
        got = train.ddp_run(setup, dist.group.WORLD, **kwargs)
        want = train.ddp_run(setup, gloo, **kwargs)
        train.compare_runs(check, f"DDP on CUDA, {name}", got[:2], want[:2])


for part in (check_collectives, check_stream, check_ddp):
    try:
        part()
    except Exception as e:  # report it with the rest, and go on to the next part
        check.true(False, f"{part.__name__}: {type(e).__name__}: {e}")
    say(rank, f"{part.__name__} done")
dist.destroy_process_group()
check.finish()
