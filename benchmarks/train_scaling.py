"""Data-parallel scaling on a compute-heavy MLP: samples/s at 1 and 2 ranks, with the gradient
all-reduce overlapped with backward (buckets launched as their gradients are ready) and without
(everything reduced after backward).

    python benchmarks/train_scaling.py                  # launches mpiexec -n 1, 2; prints a table
    python benchmarks/train_scaling.py --ranks 1,2,4
    mpiexec -n 2 python benchmarks/train_scaling.py     # one rank count, one JSON line per mode

Weak scaling: each rank runs --batch samples per step, so N ranks should do ~N x the samples/s.
"exposed comm" is the time step() waits for all-reduces, i.e. communication not hidden.
"""
import os

# One BLAS thread per rank, set before NumPy loads: ranks x threads must not exceed the cores.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="1,2", help="rank counts to launch (driver mode)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=1024)
    # 256 keeps the step compute-bound: at 64 a rank's step ran 25 % slower beside a second
    # rank than alone (they share the memory bandwidth), at 256 7-12 % (2026-12-01)
    p.add_argument("--batch", type=int, default=256, help="samples per rank per step")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--bucket-mb", type=float, default=4.0)
    return p.parse_args()


def under_mpiexec():
    return any(v in os.environ for v in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"))


def measure(args, comm, overlap):
    import dpcore.nn as nn
    import dpcore.nn.functional as F
    import dpcore.optim as optim
    from dpcore.parallel import DataParallel
    from dpcore.tensor import Tensor

    nn.manual_seed(0)
    layers = []
    for i in range(args.layers):
        layers += [nn.Linear(args.width, args.width)] + ([nn.ReLU()] if i < args.layers - 1 else [])
    engine = DataParallel(nn.Sequential(*layers), comm, optimizer=optim.SGD, lr=1e-3,
                          momentum=0.9, bucket_cap_mb=args.bucket_mb, overlap=overlap)
    rng = np.random.default_rng(comm.rank)
    x = Tensor(rng.standard_normal((args.batch, args.width)).astype(np.float32))
    y = rng.integers(0, args.width, args.batch)

    def step():
        F.cross_entropy(engine(x), y).backward()
        engine.step()
        engine.zero_grad()

    for _ in range(args.warmup):
        step()
    comm.barrier()
    times, waits = [], []
    for _ in range(args.steps):
        start, wait_before = time.perf_counter(), engine.comm_wait_s
        step()
        times.append(time.perf_counter() - start)
        waits.append(engine.comm_wait_s - wait_before)
    # medians: a machine shared with other work makes some steps slow, not the typical one
    step_s = comm.all_reduce(np.array([np.median(times)]), op="max")[0]
    wait_s = comm.all_reduce(np.array([np.median(waits)]), op="avg")[0]
    return {"ranks": comm.size, "overlap": overlap, "buckets": len(engine.buckets),
            "samples_per_s": comm.size * args.batch / step_s,
            "step_ms": 1e3 * step_s, "exposed_comm_ms": 1e3 * wait_s}


def worker(args):
    import dpcore

    with dpcore.init() as comm:
        for overlap in (True, False):
            row = measure(args, comm, overlap)
            if comm.rank == 0:
                print(json.dumps(row), flush=True)


def driver(args):
    rows = []
    for n in map(int, args.ranks.split(",")):
        cmd = ["mpiexec", "-n", str(n), sys.executable, os.path.abspath(__file__)] + sys.argv[1:]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rows += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    base = {r["overlap"]: r["samples_per_s"] for r in rows if r["ranks"] == 1}
    print(f"MLP {args.layers} x {args.width}, float32, {args.batch} samples/rank/step, "
          f"SGD momentum, bucket {args.bucket_mb} MiB, 1 BLAS thread per rank\n")
    print(f"{'ranks':>5} {'overlap':>8} {'buckets':>7} {'samples/s':>10} {'speedup':>8} "
          f"{'step ms':>8} {'exposed comm ms':>16}   (medians over {args.steps} steps)")
    for r in rows:
        speedup = r["samples_per_s"] / base[r["overlap"]] if r["overlap"] in base else float("nan")
        print(f"{r['ranks']:>5} {'yes' if r['overlap'] else 'no':>8} {r['buckets']:>7} "
              f"{r['samples_per_s']:>10.0f} {speedup:>7.2f}x {r['step_ms']:>8.1f} "
              f"{r['exposed_comm_ms']:>16.2f}")


if __name__ == "__main__":
    arguments = parse_args()
    worker(arguments) if under_mpiexec() else driver(arguments)
