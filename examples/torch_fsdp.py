"""PyTorch's FSDP2 (fully_shard) on dpcore's collectives (CPU): each rank keeps a shard of
every parameter, gathers a layer's parameters just before using them (all_gather_into_tensor)
and reduce-scatters its gradients (reduce_scatter_tensor with ReduceOp.AVG).

    mpiexec -n 2 python examples/torch_fsdp.py
    mpiexec -n 2 python examples/torch_fsdp.py --backend gloo
    torchrun --nproc-per-node 2 examples/torch_fsdp.py        # one host, through torch's store
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

from _launch import init
from torch_ddp import data


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="dpcore")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    rank, size = init(args.backend)
    torch.manual_seed(0)  # the same full model on every rank, before sharding
    model = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 4))
    mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)  # one all_gather / reduce_scatter per layer
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # on this rank's shards only
    for step in range(args.steps):
        x, y = data(step, rank, size, args.batch)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 50 == 0 or step == args.steps - 1:
            mean = loss.detach().clone()
            dist.all_reduce(mean, op=dist.ReduceOp.AVG)  # in place, as torch's all_reduce is
            if rank == 0:
                print(f"step {step:4d}  loss {mean.item():.4f}")
    weight = model[0].weight
    full = weight.full_tensor()  # a DTensor: gathered from every rank's shard
    if rank == 0:
        print(f"layer 0's weight: shard {tuple(weight.to_local().shape)} here, full "
              f"{tuple(full.shape)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
