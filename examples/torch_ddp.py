"""PyTorch's DistributedDataParallel on dpcore's collectives (CPU): an MLP learns to tell
apart points drawn around a few centres, each rank on its own share of every batch.

    mpiexec -n 2 python examples/torch_ddp.py                 # dpcore
    mpiexec -n 2 python examples/torch_ddp.py --backend gloo  # the same on gloo
    torchrun --nproc-per-node 2 examples/torch_ddp.py         # one host, through torch's store

Nothing in the training loop knows about dpcore: `import dpcore.torch` registers the backend,
and init_process_group("dpcore") picks it.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from _launch import init


def data(step, rank, size, batch, classes=4, dim=16):
    """Batch `step`, this rank's rows: the same batch on every rank, split between them."""
    g = torch.Generator().manual_seed(step)
    centres = torch.randn(classes, dim, generator=torch.Generator().manual_seed(0)) * 3
    y = torch.randint(classes, (batch,), generator=g)
    x = centres[y] + torch.randn(batch, dim, generator=g)
    return x.chunk(size)[rank], y.chunk(size)[rank]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="dpcore")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    rank, size = init(args.backend)
    torch.manual_seed(0)  # DDP broadcasts rank 0's start anyway
    model = DDP(nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                              nn.Linear(128, 4)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    for step in range(args.steps):
        x, y = data(step, rank, size, args.batch)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()  # the gradients are averaged over the ranks here, bucket by bucket
        opt.step()
        opt.zero_grad()
        if step % 50 == 0 or step == args.steps - 1:
            mean = loss.detach().clone()
            dist.all_reduce(mean, op=dist.ReduceOp.AVG)  # in place, as torch's all_reduce is
            if rank == 0:
                print(f"step {step:4d}  loss {mean.item():.4f}")
    if rank == 0:
        print(f"{args.backend}: {args.steps} steps on {size} ranks in "
              f"{time.perf_counter() - start:.2f} s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
