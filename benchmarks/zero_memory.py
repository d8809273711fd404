"""ZeRO memory per rank for a ~50 M-parameter MLP at stages 0-3, 2 and 4 ranks: bytes the engine
counts (engine.memory()), the ZeRO paper's formula, resident memory (VmHWM), and step time.

    python benchmarks/zero_memory.py                    # launches one mpiexec job per row
    python benchmarks/zero_memory.py --ranks 2 --stages 0,3
    mpiexec -n 2 python benchmarks/zero_memory.py --stages 3   # one job: one JSON line

Each (ranks, stage) runs in its own job, so the peak resident memory (VmHWM) is that row's. It
is reset (/proc/self/clear_refs) after construction and a warm-up step, so it is the peak of a
steady training step: model states + activations + the optimizer's temporaries (NumPy's AdamW
makes several arrays as large as the shard it updates) + the interpreter and libraries (~the
"base" column: resident memory before the model existed). Counted bytes are sampled after the
forward, after the backward and after the update of every timed step; the largest total is the
"counted peak" (at stage 2 it includes the bucket buffers still being reduce-scattered).
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per rank: ranks outnumber cores

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

MB = 1e6


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="2,4", help="rank counts (driver mode)")
    p.add_argument("--stages", default="0,1,2,3")
    p.add_argument("--dims", default="2048,4096,4096,4096,2048",
                   help="layer widths of the MLP (default: 50.3 M parameters)")
    p.add_argument("--batch", type=int, default=8, help="samples per rank per step")
    p.add_argument("--steps", type=int, default=3, help="timed steps, after one warm-up")
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--mixed-precision", choices=("float16", "bfloat16"), default=None,
                   help="2-byte parameters and gradients (the paper's 2 + 2 + 12 bytes)")
    return p.parse_args()


def under_mpiexec():
    return any(v in os.environ for v in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"))


def status_kib(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def reset_peak():
    """Start VmHWM again from the current resident size (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(args, comm, stage):
    import dpcore.nn as nn
    import dpcore.nn.functional as F
    from dpcore.parallel import DataParallel
    from dpcore.parallel.ledger import paper_formulas
    from dpcore.tensor import Tensor

    base_kib = status_kib("VmRSS")
    dims = [int(d) for d in args.dims.split(",")]
    nn.manual_seed(0)
    layers = []
    for i in range(len(dims) - 1):
        layers += [nn.Linear(dims[i], dims[i + 1])] + ([nn.ReLU()] if i < len(dims) - 2 else [])
    engine = DataParallel(nn.Sequential(*layers), comm, zero_stage=stage, lr=1e-4,
                          bucket_cap_mb=args.bucket_mb, mixed_precision=args.mixed_precision)
    precision = "mixed" if args.mixed_precision else "fp32"
    rng = np.random.default_rng(comm.rank)
    x = Tensor(rng.standard_normal((args.batch, dims[0])).astype(np.float32))
    y = rng.integers(0, dims[-1], args.batch)
    samples = []

    def step():
        logits = engine(x)
        samples.append(engine.memory())
        engine.scale_loss(F.cross_entropy(logits, y)).backward()
        samples.append(engine.memory())
        engine.step()
        engine.zero_grad()
        samples.append(engine.memory())

    step()  # warm-up: AdamW allocates its moments in the first update
    samples.clear()
    comm.barrier()
    reset = reset_peak()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    psi = engine.flat.count
    held = engine.memory()
    return {"ranks": comm.size, "stage": stage, "psi": psi,
            "held_mb": held["total"] / MB,
            "paper_mb": paper_formulas(psi, comm.size, stage, precision)["total"] / MB,
            "counted_peak_mb": max(s["total"] for s in samples) / MB,
            "hwm_mb": status_kib("VmHWM") * 1024 / MB if reset else float("nan"),
            "base_mb": base_kib * 1024 / MB,
            "sent_mb": sum(engine.sent_per_step().values()) / MB,
            "paper_sent_mb": paper_formulas(psi, comm.size, stage, precision)["sent_per_step"]
            / MB,
            "step_s": float(np.median(times))}


def worker(args):
    import dpcore

    with dpcore.init() as comm:
        for stage in map(int, args.stages.split(",")):
            row = measure(args, comm, stage)
            # the largest rank: peaks differ by a shard's rounding, and the slowest step counts
            worst = comm.all_reduce(np.array([row["hwm_mb"], row["counted_peak_mb"],
                                              row["step_s"]]), op="max")
            row["hwm_mb"], row["counted_peak_mb"], row["step_s"] = map(float, worst)
            if comm.rank == 0:
                print(json.dumps(row), flush=True)


def driver(args):
    rows = []
    for n in map(int, args.ranks.split(",")):
        for stage in args.stages.split(","):
            cmd = ["mpiexec", "-n", str(n), sys.executable, os.path.abspath(__file__),
                   "--stages", stage, "--dims", args.dims, "--batch", str(args.batch),
                   "--steps", str(args.steps), "--bucket-mb", str(args.bucket_mb)]
            if args.mixed_precision:
                cmd += ["--mixed-precision", args.mixed_precision]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            rows += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            print(f"  done: {n} ranks, stage {stage}", file=sys.stderr, flush=True)
    psi = rows[0]["psi"]
    kind = f"{args.mixed_precision} mixed-precision" if args.mixed_precision else "float32"
    print(f"MLP {args.dims}: psi = {psi / 1e6:.1f} M parameters, {kind} AdamW, "
          f"{args.batch} samples/rank/step, bucket {args.bucket_mb:g} MiB, MB = 1e6 bytes")
    print(f"{'ranks':>5} {'stage':>5} {'held':>9} {'paper':>9} {'counted':>9} {'VmHWM':>9} "
          f"{'base':>7} {'sent/step':>10} {'paper':>9} {'step s':>7} {'vs st.0':>8}")
    print(f"{'':>11}{'(model states, MB)':>19} {'peak MB':>9} {'peak MB':>9} {'MB':>7} "
          f"{'MB':>10} {'MB':>9}")
    for r in rows:
        stage0 = next((q["step_s"] for q in rows if q["ranks"] == r["ranks"] and q["stage"] == 0),
                      float("nan"))
        print(f"{r['ranks']:>5} {r['stage']:>5} {r['held_mb']:>9.1f} {r['paper_mb']:>9.1f} "
              f"{r['counted_peak_mb']:>9.1f} {r['hwm_mb']:>9.1f} {r['base_mb']:>7.1f} "
              f"{r['sent_mb']:>10.1f} {r['paper_sent_mb']:>9.1f} {r['step_s']:>7.2f} "
              f"{r['step_s'] / stage0:>7.2f}x")


if __name__ == "__main__":
    arguments = parse_args()
    worker(arguments) if under_mpiexec() else driver(arguments)
