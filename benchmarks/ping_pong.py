#!/usr/bin/env python3
"""Point-to-point as a user's own loop meets it: a ping-pong between ranks 0 and 1, dpcore's
send/recv against mpi4py's Send/Recv in the same run.

    mpiexec -n 2 python benchmarks/ping_pong.py                  # 8 B, and 64 KiB .. 16 MiB
    mpiexec -n 2 python benchmarks/ping_pong.py -b 8 -e 4K -f 2

Per size: 3 warm-up round trips, then a loop of timed ones with time.perf_counter around it
(rank 0 sends, rank 1 receives and sends back). Reported: half a round trip in us, the
bandwidth it makes (bytes / half a round trip), medians of --runs runs (each a new
communicator), and the ratio MPI's time / dpcore's (above 1: dpcore is faster). MPI runs the
same loop on the same buffers right after or before (the order alternates by run).

--floor adds the bound under large messages: rank 1 reads rank 0's buffer into its own with one
process_vm_readv, as dpcore's receiver does past its mailbox (one copy through the kernel, which
pins the sender's pages first), timed in the same runs. No message between two processes
moves faster than one copy, so at the sizes where both libraries sit on it, parity is the most
either can reach.
"""
import argparse
import ctypes
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import dpcore  # noqa: E402
from dpcore.bench.options import parse_size  # noqa: E402
from plain_loop import sweep  # noqa: E402

WARMUP = 3


def iters_for(nbytes, most):
    """Round trips per loop: `most`, fewer for large sizes (about 1 GiB each way, at least 10)."""
    return max(10, min(most, (1 << 30) // max(nbytes, 1)))


def round_trips(send, recv, rank, iters):
    """Seconds per half round trip over `iters` round trips after WARMUP."""
    def one():
        if rank == 0:
            send(1)
            recv(1)
        elif rank == 1:
            recv(0)
            send(0)
    for _ in range(WARMUP):
        one()
    start = time.perf_counter()
    for _ in range(iters):
        one()
    return (time.perf_counter() - start) / iters / 2


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def peer_reads(world, x, out, iters):
    """Seconds per process_vm_readv of x's bytes from rank 0's x into rank 1's out (rank 1's
    time; the other ranks wait)."""
    pid, at = world.bcast((os.getpid(), x.ctypes.data), root=0)
    if world.Get_rank() != 1:
        return 0.0
    readv = ctypes.CDLL(None, use_errno=True).process_vm_readv
    readv.restype = ctypes.c_ssize_t
    local, remote = _IoVec(out.ctypes.data, out.nbytes), _IoVec(at, x.nbytes)
    start = time.perf_counter()
    for _ in range(iters):
        if readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) != x.nbytes:
            raise OSError(ctypes.get_errno(), "process_vm_readv")
    return (time.perf_counter() - start) / iters


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("64K"))
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("16M"))
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("--iters", type=int, default=1000, help="round trips per loop, at most")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--no-8", action="store_true", help="without the 8-byte size")
    p.add_argument("--floor", action="store_true",
                   help="also time one process_vm_readv of each size (the module's docstring)")
    args = p.parse_args()
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    first = [] if args.no_8 or args.minbytes <= 8 else [8]
    sizes = first + sweep(args.minbytes, args.maxbytes, args.stepfactor)
    found = {s: {"dpcore": [], "MPI": [], "floor": []} for s in sizes}
    for run in range(args.runs):
        with dpcore.init() as comm:
            for nbytes in sizes:
                x, out = np.ones(nbytes, np.uint8), np.empty(nbytes, np.uint8)
                loops = {"dpcore": (lambda peer: comm.send(x, peer),
                                    lambda peer: comm.recv(out, peer)),
                         "MPI": (lambda peer: world.Send(x, peer),
                                 lambda peer: world.Recv(out, peer))}
                order = ("dpcore", "MPI") if run % 2 == 0 else ("MPI", "dpcore")
                for name in order:
                    world.Barrier()
                    t = round_trips(*loops[name], rank, iters_for(nbytes, args.iters))
                    found[nbytes][name].append(world.allreduce(t, op=MPI.MAX))
                if args.floor:
                    world.Barrier()
                    t = peer_reads(world, x, out, iters_for(nbytes, args.iters))
                    found[nbytes]["floor"].append(world.allreduce(t, op=MPI.MAX))
    if rank != 0:
        return
    print(f"ping-pong between ranks 0 and 1 ({world.Get_size()} ranks), uint8: a plain loop "
          f"({WARMUP} warm-up round trips), us per message (half a round trip) and MB/s, "
          f"medians of {args.runs} runs; ratio = MPI / dpcore")
    print(f"{'size':>10} {'dpcore us':>10} {'MPI us':>10} {'dpcore MB/s':>12} {'MPI MB/s':>10} "
          f"{'ratio':>6} {'ratio range':>12}" + (f" {'floor us':>9}" if args.floor else ""))
    for nbytes in sizes:
        f = found[nbytes]
        ours, theirs = statistics.median(f["dpcore"]), statistics.median(f["MPI"])
        ratios = [m / d for d, m in zip(f["dpcore"], f["MPI"])]
        print(f"{nbytes:>10} {ours * 1e6:>10.2f} {theirs * 1e6:>10.2f} "
              f"{nbytes / ours / 1e6:>12.2f} {nbytes / theirs / 1e6:>10.2f} "
              f"{statistics.median(ratios):>6.2f} {min(ratios):>5.2f}-{max(ratios):<6.2f}"
              + (f" {statistics.median(f['floor']) * 1e6:>9.2f}" if args.floor else ""),
              flush=True)


if __name__ == "__main__":
    main()
