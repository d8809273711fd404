"""Issue 24's verbs through torch.distributed: the "dpcore" backend against gloo, in one job.

For each verb (reduce, gather, scatter, all_to_all_single, send/recv) and size, the time per call
of a plain loop of `dist.<verb>` on the default (dpcore) group and on a gloo group of the same
ranks, float32, alternating between the two within each round; each row is the median over
--runs rounds, and the ratio gloo / dpcore (above 1: dpcore is faster). send/recv is a ping-pong
between ranks 0 and 1 (a call: one message each way, halved), the other ranks idle.
Sizes are the whole buffer as nccl-tests counts it (gather's output, scatter's input).

Usage: mpiexec -n 2 python benchmarks/torch_verbs.py [--max-bytes 16M] [--runs 3] [--verbs ...]
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import dpcore.torch  # noqa: F401  (registers the backend)
from dpcore.cost.units import parse_bytes

VERBS = ("reduce", "gather", "scatter", "all_to_all", "sendrecv")


def per_call(call, nbytes):
    """Seconds per call of a loop of about 0.1 s (at least 3 calls), after 3 warm-up calls."""
    for _ in range(3):
        call()
    iters = max(3, min(1000, int(0.1 / max(nbytes / 1e9, 30e-6))))
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    return (time.perf_counter() - start) / iters


def make_call(verb, nbytes, group, rank, size):
    """A call of verb on `group` (None: the default, dpcore) moving a buffer of nbytes."""
    count = max(size, nbytes // 4 // size * size)  # the buffer splits evenly
    shard = count // size
    if verb == "reduce":
        x = torch.ones(count)
        return lambda: dist.reduce(x, 0, group=group)
    if verb == "gather":
        x = torch.ones(shard)
        outs = [torch.empty(shard) for _ in range(size)] if rank == 0 else None
        return lambda: dist.gather(x, outs, dst=0, group=group)
    if verb == "scatter":
        out = torch.empty(shard)
        ins = [torch.ones(shard) for _ in range(size)] if rank == 0 else None
        return lambda: dist.scatter(out, ins, src=0, group=group)
    if verb == "all_to_all":
        x, out = torch.ones(count), torch.empty(count)
        return lambda: dist.all_to_all_single(out, x, group=group)
    x = torch.ones(count)  # sendrecv: a ping-pong of ranks 0 and 1

    def ping_pong():
        if rank == 0:
            dist.send(x, 1, group=group)
            dist.recv(x, 1, group=group)
        elif rank == 1:
            dist.recv(x, 0, group=group)
            dist.send(x, 0, group=group)
    return ping_pong


def table(verb, args, gloo, rank, size):
    if rank == 0:
        print(f"\n# dist.{verb}, float32, {size} ranks; us per call (median of {args.runs} "
              f"rounds){'; a ping-pong: half a round trip' if verb == 'sendrecv' else ''}")
        print(f"{'bytes':>10} {'dpcore':>10} {'gloo':>10} {'gloo/dpcore':>12}")
    nbytes = 8
    while nbytes <= args.max_bytes:
        calls = {"dpcore": make_call(verb, nbytes, None, rank, size),
                 "gloo": make_call(verb, nbytes, gloo, rank, size)}
        times = {k: [] for k in calls}
        for _ in range(args.runs):
            for name, call in calls.items():
                times[name].append(per_call(call, nbytes))
        if rank == 0:
            half = 2 if verb == "sendrecv" else 1
            dp, gl = (statistics.median(times[k]) * 1e6 / half for k in ("dpcore", "gloo"))
            print(f"{nbytes:>10} {dp:>10.1f} {gl:>10.1f} {gl / dp:>12.2f}", flush=True)
        nbytes *= args.step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-bytes", type=parse_bytes, default=16 << 20)
    parser.add_argument("--step", type=int, default=8, help="each size is the last times this")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--verbs", nargs="+", choices=VERBS, default=VERBS)
    args = parser.parse_args()
    dist.init_process_group("dpcore")  # env:// filled from mpiexec by dpcore.torch
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    for verb in args.verbs:
        table(verb, args, gloo, rank, size)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
