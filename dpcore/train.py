"""Data-parallel training demo: an MLP on scikit-learn's bundled handwritten digits.

    mpiexec -n N python -m dpcore.train --epochs 10 --batch-size 64

--batch-size is the global batch: every rank takes its slice of each one (DistributedSampler),
so any N trains the same model as one process, up to float rounding, and prints the same
accuracy curve; only samples/s and the communication share change with N. --device cuda trains
on the GPUs (CuPy; one per rank of a node), the data put there once.
"""
import os
import sys
import time

import numpy as np

import dpcore
import dpcore.nn as nn
import dpcore.nn.functional as F
import dpcore.optim as optim
from dpcore._cli import blas
from dpcore._cli.args import HelpFormatter, Parser, positive, whole
from dpcore._cli.errors import UsageError, run_main
from dpcore._cli.terminal import stderr_is_terminal
from dpcore.devices import device_module
from dpcore.dtypes import bfloat16_dtype
from dpcore.parallel import DataParallel, DistributedSampler
from dpcore.parallel.ledger import report
from dpcore.tensor import Tensor, no_grad


# The learning rate each optimizer trains this model well with (10 epochs, batch BASE_BATCH)
DEFAULT_LR = {"adamw": 1e-3, "sgd": 0.1}
BASE_BATCH = 64
SGD_MOMENTUM = 0.9


def parse_args(argv=None):
    p = Parser(prog="python -m dpcore.train", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--zero-stage", type=int, default=0, choices=(0, 1, 2, 3),
                   help="0: plain data parallelism; 1, 2, 3: ZeRO's stages")
    p.add_argument("--epochs", type=whole(1), default=10, help="passes over the training set")
    p.add_argument("--batch-size", type=whole(1), default=64,
                   help="global batch (all ranks together); at least the number of ranks")
    p.add_argument("--lr", type=positive, default=None,
                   help="learning rate (default: " +
                        ", ".join(f"{v:g} for {k}" for k, v in DEFAULT_LR.items()) + ")")
    p.add_argument("--scale-lr", action="store_true",
                   help=f"the linear scaling rule: lr x batch-size / {BASE_BATCH} (the batch the "
                        f"default lr is for), as large-batch training does")
    p.add_argument("--warmup-epochs", type=float, default=0.0,
                   help="grow the lr linearly from near 0 over this many epochs (the remedy "
                        "for a scaled lr's first steps)")
    p.add_argument("--seed", type=int, default=0, help="data order and initial weights")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the model, the data and the collectives' arrays live (cuda: "
                        "CuPy, GPU local rank %% GPUs on each node)")
    p.add_argument("--bucket-mb", type=positive, default=25.0, help="gradient bucket size in MiB")
    p.add_argument("--hidden", type=whole(1), default=128, help="width of the two hidden layers")
    p.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw",
                   help=f"sgd runs with momentum {SGD_MOMENTUM}")
    p.add_argument("--mixed-precision", choices=("float16", "bfloat16"), default=None,
                   help="2-byte parameters and gradients, float32 master weights and moments "
                        "(float16: with a dynamic loss scale)")
    p.add_argument("--save", metavar="DIR", default=None,
                   help="save a sharded checkpoint into DIR after every epoch")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="start from the checkpoint in DIR (saved at any number of ranks and "
                        "any ZeRO stage), after the epoch it was saved at")
    log = p.add_mutually_exclusive_group()
    log.add_argument("--quiet", action="store_true",
                     help="print only the final result (and errors): no header, epoch lines or "
                          "progress bar")
    log.add_argument("--log-every", type=whole(1), default=1, metavar="N",
                     help="an epoch line every N epochs")
    p.add_argument("--report-memory", action="store_true",
                   help="after training, print each rank's measured bytes (held and sent per "
                        "step) beside the ZeRO paper's formulas")
    args = p.parse_args(argv)
    if args.lr is None:
        args.lr = DEFAULT_LR[args.optimizer]
    if args.scale_lr:
        args.lr *= args.batch_size / BASE_BATCH
    if args.warmup_epochs < 0:
        p.error(f"argument --warmup-epochs: expected 0 or more, not {args.warmup_epochs:g}")
    if args.mixed_precision == "bfloat16" and bfloat16_dtype() is None:
        p.error("--mixed-precision bfloat16 needs ml_dtypes, NumPy's bfloat16 "
                "(pip install ml_dtypes); float16 needs nothing more")
    return args


def load_data(seed):
    """(x_train, y_train, x_test, y_test, name); the held-out fifth is the same on every rank."""
    try:
        from sklearn.datasets import load_digits
        digits = load_digits()
        x, y, name = digits.data / 16.0, digits.target, "digits (scikit-learn, 8x8)"
    except ImportError:
        (x, y), name = synthetic(), "synthetic blobs (scikit-learn is not installed)"
    order = np.random.default_rng(seed).permutation(len(x))
    test, train = order[:len(x) // 5], order[len(x) // 5:]
    x = x.astype(np.float32)
    return x[train], y[train], x[test], y[test], name


def synthetic(n=1797, classes=10, dim=64, seed=1234):
    """Gaussian blobs shaped like digits: 64 features, 10 classes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    return rng.standard_normal((classes, dim))[y] + 1.5 * rng.standard_normal((n, dim)), y


def progress(total, epoch, shown):
    """A tqdm bar where `shown` (rank 0's, when its output reaches a terminal: under mpiexec,
    whose stderr decides, dpcore._cli.terminal); else nothing, so that a log has no frames."""
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if not shown or tqdm is None:
        class Quiet:
            def update(self, n=1):
                pass

            def close(self):
                pass
        return Quiet()
    return tqdm(total=total, desc=f"epoch {epoch}", leave=False, disable=False)


def correct_count(engine, x, y, comm):
    """This rank's share of the test set: how many it classifies right."""
    start, stop = dpcore.shard_range(len(x), comm.size, comm.rank)
    engine.eval()
    with no_grad():
        logits = engine(Tensor(x[start:stop])).data
    engine.train()
    return float((logits.argmax(axis=1) == y[start:stop]).sum())  # one wait for the device


def share_cores(comm):
    """Give each rank's BLAS its share of this node's cores: ranks x default BLAS threads
    oversubscribe the machine, a rank whose collective peer is descheduled waits milliseconds,
    and one rank against two would compare every core with half as many each. A thread count the
    user set is kept."""
    if any(v in os.environ for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")):
        return
    blas.cap(max(1, len(os.sched_getaffinity(0)) // comm.local_size))


def train(args, comm, xp=np):
    """Trains with arrays of module xp (numpy; cupy for --device cuda): the model is moved
    there before DataParallel builds its buffers, the data once before the first step."""
    *arrays, name = load_data(args.seed)
    x_train, y_train, x_test, y_test = (xp.asarray(a) for a in arrays)
    nn.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(x_train.shape[1], args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10)).to(xp)
    opt, opt_kwargs = ((optim.AdamW, {}) if args.optimizer == "adamw" else
                       (optim.SGD, {"momentum": SGD_MOMENTUM}))
    engine = DataParallel(model, comm, zero_stage=args.zero_stage, optimizer=opt, lr=args.lr,
                          bucket_cap_mb=args.bucket_mb, mixed_precision=args.mixed_precision,
                          **opt_kwargs)
    first_epoch = 1 + (resume(engine, args.resume) if args.resume else 0)
    sampler = DistributedSampler(len(x_train), args.batch_size, comm.rank, comm.size,
                                 seed=args.seed)
    talks = comm.rank == 0 and not args.quiet  # the header, epoch lines and the bar
    bar_shown = talks and stderr_is_terminal()
    if talks:
        count = sum(p.size for p in model.parameters())
        units = "unit(s)" if args.zero_stage == 3 else "bucket(s)"  # stage 3: one per module
        print(f"{name}: {len(x_train)} train, {len(x_test)} held out | {count} parameters, "
              f"{len(engine.buckets)} {units} | {comm.size} rank(s), {comm.transport}, "
              f"ZeRO stage {args.zero_stage}"
              + (f", {args.mixed_precision} mixed precision" if args.mixed_precision else "")
              + (f", on {args.device}" if args.device != "cpu" else ""), flush=True)
    run_start, last = time.perf_counter(), None
    step = (first_epoch - 1) * len(sampler)  # steps taken: warm-up goes on after a resume
    for epoch in range(first_epoch, args.epochs + 1):
        sampler.set_epoch(epoch)
        bar = progress(len(sampler), epoch, bar_shown)
        loss_sum, step_s, wait_before = 0.0, 0.0, engine.comm_wait_s
        start = time.perf_counter()
        for local, total in sampler:
            engine.optimizer.lr = warmed_up(args, step, len(sampler))
            step += 1
            t0 = time.perf_counter()
            local = xp.asarray(local)  # the sampler's indices, to where the data is
            loss = F.cross_entropy(engine(Tensor(x_train[local])), y_train[local], reduction="sum")
            # summed loss x size / global batch: the ranks' average gradient is the batch mean's
            engine.scale_loss(loss * (comm.size / total)).backward()
            engine.step()
            engine.zero_grad()
            step_s += time.perf_counter() - t0
            loss_sum = loss_sum + loss.data.astype(np.float64)  # on the device: no wait per step
            bar.update(1)
        elapsed = time.perf_counter() - start
        bar.close()
        sums = comm.all_reduce(np.array([float(loss_sum),
                                         correct_count(engine, x_test, y_test, comm),
                                         engine.comm_wait_s - wait_before, step_s]))
        slowest = comm.all_reduce(np.array([elapsed]), op="max")[0]
        last = (sums[0] / len(x_train), sums[1] / len(x_test))
        if talks and epoch % args.log_every == 0:
            print(f"epoch {epoch:3d}  loss {last[0]:.4f}  test acc {last[1]:.4f}  "
                  f"samples/s {len(x_train) / slowest:9.0f}  "
                  f"comm wait {sums[2] / sums[3]:6.1%} of step time", flush=True)
        if args.save:
            save(engine, args.save, epoch)
    took = comm.all_reduce(np.array([time.perf_counter() - run_start]), op="max")[0]
    if comm.rank == 0:
        if last is None:
            print(f"nothing to train: the checkpoint is at epoch {first_epoch - 1} of "
                  f"{args.epochs}")
        else:
            print(f"done: {epoch - first_epoch + 1} epoch(s) in {took:.1f} s (with evaluation"
                  f"{' and checkpoints' if args.save else ''}); final loss {last[0]:.4f}, test acc "
                  f"{last[1]:.4f}" + (f"; checkpoint in {args.save}" if args.save else ""),
                  flush=True)
    if args.report_memory:
        print_ledger(engine, comm)
    return engine


def warmed_up(args, step, steps_per_epoch):
    """The lr of step `step` (from 0): linear warm-up over args.warmup_epochs, then args.lr."""
    warmup = args.warmup_epochs * steps_per_epoch
    return args.lr * min(1.0, (step + 1) / warmup) if warmup > 0 else args.lr


def check_save_path(path, comm):
    """--save's folder made (or found) and writable before the first epoch, not after it; a
    UsageError on every rank if not."""
    why = ""
    if comm.rank == 0:
        try:
            os.makedirs(path, exist_ok=True)
            if not os.access(path, os.W_OK | os.X_OK):
                why = "cannot be written"
        except OSError as e:
            why = e.strerror or str(e)
    if comm.broadcast(np.array([bool(why)], np.int32), root=0)[0]:
        raise UsageError(f"--save {path}: {why}")  # rank 0's words: only it prints


def save(engine, path, epoch):
    """The checkpoint, with the epoch it ends in its meta.json (under the manifest's checksum,
    so the two cannot part or be changed apart). A checkpoint that cannot be written fails alike
    on every rank (checkpoint.py): a UsageError."""
    try:
        engine.save(path, extra={"epoch": epoch})
    except ValueError as e:
        raise UsageError(str(e)) from None


def resume(engine, path):
    """Loads the checkpoint in `path`; returns the epoch it was saved after (the same on every
    rank: every rank read the same checked meta.json). A checkpoint that does not load fails
    alike on every rank (checkpoint.py): a UsageError."""
    try:
        epoch = engine.load(path).get("epoch")
    except ValueError as e:
        raise UsageError(str(e)) from None
    if not (isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 1):
        raise UsageError(f"{path} holds no epoch count from dpcore.train --save (its epoch is "
                         f"{epoch!r}, not a whole number of 1 or more)")
    return epoch


def print_ledger(engine, comm):
    """Every rank's ledger, in rank order (shards differ by an element here and there)."""
    for r in range(comm.size):
        if r == comm.rank:
            print("\n".join(report(engine)), flush=True)
        comm.barrier()


def pick_device(device, comm):
    """The array module of --device on every rank, or None on every rank when some rank cannot
    use it; then each rank has printed one line: why, or which ranks could not."""
    if device == "cpu":
        return np
    try:
        xp, why = device_module(device, comm.local_rank), None
    except RuntimeError as e:
        xp, why = None, str(e)
    failed = np.flatnonzero(comm.all_gather(np.array([why is not None], np.int32)))
    if not failed.size:
        return xp
    where = f"rank {comm.rank}: " if comm.size > 1 else ""
    if why is None:
        why = (f"--device {device} works here, but not on rank(s) "
               f"{', '.join(map(str, failed))}: every rank stops")
    sys.stderr.write(f"dpcore.train: {where}{why}\n")  # one write: the ranks' lines stay whole
    sys.stderr.flush()
    return None


def main(argv=None):
    args = parse_args(argv)
    with dpcore.init() as comm:
        share_cores(comm)
        if args.batch_size < comm.size:  # the same on every rank: all leave alike
            if comm.rank == 0:
                print(f"dpcore.train: --batch-size {args.batch_size} is the global batch; it "
                      f"must be at least the number of ranks ({comm.size})", file=sys.stderr)
            return 2
        xp = pick_device(args.device, comm)
        if xp is None:
            return 2
        if args.save:
            check_save_path(args.save, comm)
        try:
            train(args, comm, xp)
        except NotImplementedError as e:  # raised on every rank alike
            if comm.rank == 0:
                print(f"dpcore.train: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    run_main(main)
