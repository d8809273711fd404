"""The torch.distributed backend "dpcore" against gloo, in one job (mpiexec -n 2):

1. time per call of dist.all_reduce (float32, in place) on the dpcore group, on a gloo group of
   the same ranks, and of dpcore's own comm.all_reduce on the group's communicator, from 4 B to
   64 MiB; rounds alternate between the three, and each row is the median of --runs rounds;
   bus bandwidth as nccl-tests counts it (2 (n-1)/n bytes per call);
2. a DistributedDataParallel training step of an MLP of --params parameters (default 25.2M):
   step time on each backend, and its exposed communication: the step time less that of the
   same step under no_sync() (no communication at all), medians of --steps steps, alternating.

Usage: mpiexec -n 2 python benchmarks/torch_backend.py [--max-bytes 64M] [--runs 3]
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import dpcore.torch  # noqa: F401  (registers the backend)


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def per_call(call, nbytes):
    """Seconds per call of a loop of about 0.2 s (at least 3 calls), after 3 warm-up calls."""
    for _ in range(3):
        call()
    iters = max(3, min(2000, int(0.2 / max(nbytes / 1e9, 20e-6))))
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    return (time.perf_counter() - start) / iters


def all_reduce_table(args, gloo, rank, size):
    comm = dist.group.WORLD.communicator
    if rank == 0:
        print(f"# dist.all_reduce, float32 in place, {size} ranks; time in us (median of "
              f"{args.runs}), busbw in GB/s")
        print(f"{'bytes':>10} {'dpcore':>10} {'gloo':>10} {'comm':>10} {'gloo/dpcore':>12} "
              f"{'busbw dp':>9} {'busbw gloo':>10} {'busbw comm':>10}")
    x = torch.ones(1)
    for group in (None, gloo, None):  # first calls: code paths, pages, dpcore's tuner
        per_call(lambda: dist.all_reduce(x, group=group), 1 << 20)
    nbytes = 4
    while nbytes <= args.max_bytes:
        x = torch.ones(nbytes // 4)
        a = x.numpy()
        calls = {"dpcore": lambda: dist.all_reduce(x),
                 "gloo": lambda: dist.all_reduce(x, group=gloo),
                 "comm": lambda: comm.all_reduce(a, out=a)}
        times = {k: [] for k in calls}
        for _ in range(args.runs):
            for name, call in calls.items():
                times[name].append(per_call(call, nbytes))
        t = {k: statistics.median(v) for k, v in times.items()}
        bus = {k: 2 * (size - 1) / size * nbytes / v / 1e9 for k, v in t.items()}
        if rank == 0:
            print(f"{nbytes:>10} {t['dpcore'] * 1e6:>10.1f} {t['gloo'] * 1e6:>10.1f} "
                  f"{t['comm'] * 1e6:>10.1f} {t['gloo'] / t['dpcore']:>12.2f} "
                  f"{bus['dpcore']:>9.2f} {bus['gloo']:>10.2f} {bus['comm']:>10.2f}", flush=True)
        nbytes *= 4


def mlp(width, depth):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def ddp_steps(args, gloo, rank):
    # depth x (width^2 + width) parameters: 25.2M at the defaults
    width = args.width
    models = {"dpcore": DDP(mlp(width, args.depth)), "gloo": DDP(mlp(width, args.depth),
                                                                  process_group=gloo)}
    n_params = sum(p.numel() for p in models["dpcore"].parameters())
    x = torch.randn(args.batch, width)
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-6) for k, m in models.items()}

    def step(name, sync):
        model, opt = models[name], opts[name]
        dist.barrier()
        start = time.perf_counter()
        if sync:
            model(x).square().mean().backward()
        else:
            with model.no_sync():
                model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        return time.perf_counter() - start

    for name in models:  # warm-up: buckets rebuilt, memory touched
        step(name, True)
        step(name, True)
    t = {(name, sync): [] for name in models for sync in (True, False)}
    for _ in range(args.steps):
        for name in models:
            for sync in (True, False):
                t[name, sync].append(step(name, sync))
    if rank == 0:
        print(f"\n# DDP step, MLP {args.depth} x Linear({width}, {width}) = "
              f"{n_params / 1e6:.1f}M parameters, batch {args.batch} per rank, medians of "
              f"{args.steps} steps (s)")
        print(f"{'backend':>8} {'step':>8} {'no_sync':>8} {'exposed comm':>13}")
        for name in models:
            s, n = statistics.median(t[name, True]), statistics.median(t[name, False])
            print(f"{name:>8} {s:>8.3f} {n:>8.3f} {s - n:>13.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-bytes", type=parse_bytes, default=64 << 20)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--skip-ddp", action="store_true")
    args = p.parse_args()
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getppid() % 1000))
    dist.init_process_group("dpcore", rank=world.rank, world_size=world.size)
    gloo = dist.new_group(backend="gloo")
    all_reduce_table(args, gloo, world.rank, world.size)
    if not args.skip_ddp:
        ddp_steps(args, gloo, world.rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
