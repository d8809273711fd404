"""The bench's entry point: parse the flags, run every (dtype, op, root) sweep, write --json,
--csv and --plot.
`python -m dpcore.bench` and benchmarks/*_perf.py call run()."""
import os
import sys

from .._cli.errors import run_main
from ..dtypes import parse_dtype
from . import outputs
from .collectives import TESTS
from .devices import DeviceUnavailable, open_arrays
from .harness import Bench
from .options import parser
from .table import load_model


def main(argv=None, collective=None):
    """Run the benchmark; returns the exit status (1 when any element was wrong)."""
    from mpi4py import MPI

    import dpcore

    p = parser(collective)
    args = p.parse_args(argv)
    if args.minbytes > args.maxbytes:
        p.error(f"invalid sizes: -b {args.minbytes} > -e {args.maxbytes}")
    iters = 1 if args.iters is None else args.iters
    if min(args.stepfactor, args.repeat, iters) < 1 or min(args.warmup_iters, args.check) < 0:
        p.error("-f, -n and --repeat must be at least 1; -w and -c at least 0")
    if args.minbytes == 0 and args.stepfactor > 1:
        p.error(f"-b 0 times -f {args.stepfactor} stays 0 forever: start at -b 1 or more "
                "(or step by -i with -f 1)")
    try:
        written = outputs.targets(args)
    except ValueError as e:
        p.error(str(e))
    for flag, path in [*((f"--{k}", v) for k, v in written.items()), ("--plot", args.plot)]:
        folder = path and outputs.missing_folder(path)
        if folder:  # before the run, not after it
            p.error(f"{flag} {path}: the folder {folder} does not exist")
    if args.one_buffer and args.register:
        p.error("--one-buffer and -R 1 choose dpcore's buffers two ways: pick one")
    check_device(p, args)
    if args.plot:
        from .plot import check_matplotlib

        try:
            check_matplotlib()
        except ImportError as e:
            p.error(str(e))
    coll = TESTS[collective or args.collective]
    ops = args.op if coll.reduces else ["sum"]
    try:  # before dpcore.init: a rank's GPU is chosen first
        arrays = open_arrays(args.device, MPI.COMM_WORLD)
    except DeviceUnavailable as e:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"{p.prog}: error: {e}", file=sys.stderr, flush=True)
        return 2
    # The default fitted model describes host memory: on a GPU, only a --model given
    model = (load_model(args.model, MPI.COMM_WORLD.Get_size(), p)
             if args.device == "cpu" or args.model else (None, None, None))
    # -T: nccl-tests' 0 is no limit of its own; here it leaves dpcore's (DPCORE_TIMEOUT)
    with dpcore.init(timeout=args.timeout or None) as comm:
        bench = Bench(comm, coll, args, arrays)
        bench.use_model(*model)
        if coll.rooted and args.root is not None and not 0 <= args.root < bench.n:
            bench.say(f"# root {args.root} is not a rank in [0, {bench.n})")
            return 2
        roots = [-1] if not coll.rooted else range(bench.n) if args.root is None else [args.root]
        if coll.name == "sendrecv" and bench.n < 2:  # a rank may not send to itself
            bench.say("# sendrecv sends to the next rank and receives from the previous one: "
                      "run it on 2 ranks or more")
            return 2
        bench.header()
        for dtype_text in args.datatype:
            if not arrays.supports(parse_dtype(dtype_text)):
                bench.say(f"# {dtype_text}: skipped: CuPy has no {dtype_text} arrays")
                continue
            for op in ops:
                if op == "avg" and parse_dtype(dtype_text).kind in "iu":
                    continue  # avg needs a floating dtype
                for root in roots:  # nccl-tests' order: dtype, op, root, each a sweep
                    try:
                        bench.time_test(dtype_text, op, root)
                    except ValueError as e:  # e.g. --algo one_shot past its size: every rank
                        bench.say(f"# {dtype_text} {op}: stopped: {e}")
        result = bench.summary()
        if written and bench.rank == 0:
            one = lambda names: names[0] if len(names) == 1 else names  # noqa: E731
            ref = bench.reference
            doc = {"collective": coll.name, "nranks": bench.n, "dtype": one(args.datatype),
                   "op": one(ops) if coll.reduces else None, "algo": args.algo,
                   "transport": comm.transport, "device": args.device,
                   "compare": ref.name if ref else None, "compare_left_out": bench.left_out,
                   "floor": args.floor,
                   "repeat": args.repeat, "args": vars(args), "rows": bench.rows,
                   "environment": bench.provenance, **result}
            if bench.model is not None:
                doc["model"] = os.path.abspath(bench.model_path)
            for kind, path in written.items():
                outputs.write(kind, path, doc)
        if args.plot and bench.rank == 0 and bench.rows:
            from .plot import plot

            plot(args.plot, bench.rows, coll, comm.transport, bench.reference)
            print(f"# plot: {args.plot}", flush=True)
        bench.close()
    return 1 if result["wrong"] else 0


def check_device(p, args):
    """Settle --device's defaults (cuda: --floor, --compare nccl) and refuse what it cannot do."""
    if args.compare == "none":
        args.compare = None
    if args.device == "cpu":
        if args.compare == "nccl":
            p.error("--compare nccl times NCCL on GPU buffers: add --device cuda")
        return
    args.floor = True
    if args.compare is None:
        args.compare = "nccl"
    if args.compare == "mpi":
        p.error("--compare mpi needs host buffers (MPI here is not CUDA-aware); with --device "
                "cuda the comparison is --compare nccl")


def run(argv=None, collective=None):
    """main(), but an exception on one rank ends the whole job instead of hanging the rest."""
    run_main(main, argv, collective)
