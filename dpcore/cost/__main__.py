"""python -m dpcore.cost memory | scaling | predict | fit  (fit runs under mpiexec)."""
import os

from .._cli.args import Parser, argument, whole
from ..bench.plot import check_matplotlib
from .._cli.errors import run_main
from . import memory, plots, scaling
from .choose import best_algorithm, crossover, predict
from .auto import beyond
from .formulas import COLLECTIVES, algorithms, cost
from .params import DEFAULT, Params, default_path, load
from .units import fmt_bytes, fmt_time, parse_bytes, parse_count

positive_count = argument(parse_count)

ONE_SHOT_LIMIT = 256 << 10


def main(argv=None):
    parser = Parser(prog="python -m dpcore.cost", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    m = sub.add_parser("memory", help="ZeRO model-state memory per rank, stage by stage")
    m.add_argument("--params", type=positive_count, required=True, help="parameters, e.g. 70e9")
    m.add_argument("--ranks", type=whole(1), required=True)
    m.add_argument("--stage", type=int, choices=range(4), help="one stage (default: all)")
    m.add_argument("--precision", choices=sorted(memory.PRECISIONS), default="mixed")
    m.add_argument("--gpu-memory", type=float, default=80.0, metavar="GB")
    m.add_argument("--plot", metavar="FILE.png", help="bars per stage, as ZeRO's figure 1")

    s = sub.add_parser("scaling", help="predicted data-parallel step time and efficiency")
    s.add_argument("--params", type=positive_count, default=1.3e9, help="parameters (1.3e9)")
    s.add_argument("--ranks", type=_rank_counts, default="8,64,1024",
                   help="comma-separated (8,64,1024)")
    s.add_argument("--bandwidth", type=float, default=25.0, metavar="GB/s",
                   help="network bandwidth per rank (25 GB/s: a 200 Gb/s NIC per GPU)")
    s.add_argument("--latency", type=float, default=10.0, metavar="us",
                   help="network latency per message (10 us)")
    s.add_argument("--reduce-bandwidth", type=float, default=None, metavar="GB/s",
                   help="speed of the reduction (gamma); default: free")
    s.add_argument("--step-flops", type=positive_count, default=None, metavar="F",
                   help="FLOPs of one rank's step (weak) or the global batch (--strong); "
                        "default 6 x params x --tokens")
    s.add_argument("--tokens", type=positive_count, default=16384,
                   help="tokens per rank per step when --step-flops is not given (16384)")
    s.add_argument("--flops-per-rank", type=positive_count, default=150e12, metavar="R",
                   help="achieved FLOP/s per rank (150e12)")
    s.add_argument("--strong", action="store_true", help="fixed global batch")
    s.add_argument("--overlap", action="store_true", help="overlap with backward (DDP)")
    s.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket, MB (25)")
    s.add_argument("--fp32", action="store_true", help="4-byte gradients (default fp16, 2)")
    s.add_argument("--hierarchical", type=int, default=None, metavar="K",
                   help="K ranks per node: hierarchical all-reduce")
    s.add_argument("--node-bandwidth", type=float, default=150.0, metavar="GB/s",
                   help="bandwidth inside a node (150 GB/s)")
    s.add_argument("--node-latency", type=float, default=2.0, metavar="us",
                   help="latency inside a node (2 us)")
    s.add_argument("--plot", metavar="FILE.png", help="efficiency against ranks")

    p = sub.add_parser("predict", help="every algorithm's predicted time, and the best")
    p.add_argument("coll", choices=COLLECTIVES)
    p.add_argument("--ranks", type=whole(1), default=8)
    p.add_argument("--sizes", type=argument(_sizes), default="1K,64K,1M,64M",
                   help="bytes S, comma-separated")
    p.add_argument("--local-size", type=int, default=None, help="ranks per node (hierarchical)")
    _add_params_args(p)

    f = sub.add_parser("fit", help="measure alpha, beta, gamma (under mpiexec -n 2 or more)")
    f.add_argument("--out", default=None, help=f"JSON file (default {default_path()})")
    f.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    f.add_argument("--plot", metavar="FILE.png", help="the measurements beside the fit")

    args = parser.parse_args(argv)
    if getattr(args, "plot", None):
        check_matplotlib()  # before a minute of fitting, not after
    if args.command == "fit":
        from .fit_cli import run_fit

        return run_fit(args.out or default_path(), args.quick, args.plot)
    try:
        run_model(args)
    except ValueError as e:  # what the numbers given cannot describe (8 ranks in nodes of 3)
        sub.choices[args.command].error(str(e))
    if getattr(args, "plot", None):
        print(f"plot: {args.plot}")
    return 0


def run_model(args):
    """memory, scaling or predict: arithmetic on the numbers given, no communication."""
    if args.command == "memory":
        stages = (args.stage,) if args.stage is not None else (0, 1, 2, 3)
        print(memory.report(args.params, args.ranks, stages, args.precision, args.gpu_memory))
        if args.plot:
            plots.memory(args.plot, args.params, args.ranks, stages, args.precision,
                         args.gpu_memory)
    elif args.command == "scaling":
        run_scaling(args)
    else:
        run_predict(args)


def _sizes(text):
    return [parse_bytes(x) for x in text.split(",")]


def _rank_counts(text):
    return [whole(1)(r) for r in text.split(",")]


def run_scaling(args):
    ranks = args.ranks
    link = Params.from_rates(args.latency, args.bandwidth, args.reduce_bandwidth)
    node = Params.from_rates(args.node_latency, args.node_bandwidth, args.reduce_bandwidth)
    step_flops, tokens = args.step_flops, None
    if step_flops is None:
        tokens = args.tokens
        if args.strong:  # the global batch the smallest rank count runs at --tokens per rank
            tokens *= min(ranks)
        step_flops = 6 * args.params * tokens
    print(scaling.report(args.params, ranks, link, step_flops, args.flops_per_rank,
                         4 if args.fp32 else 2, args.overlap, args.hierarchical, node,
                         args.strong, tokens, args.bucket_mb * 1e6))
    if args.plot:
        rows = scaling.predict_scaling(args.params, ranks, link, step_flops,
                                       args.flops_per_rank, 4 if args.fp32 else 2, args.overlap,
                                       args.hierarchical, node, args.strong,
                                       args.bucket_mb * 1e6)
        how = ", ".join(w for w, on in (("overlapped", args.overlap),
                                        ("hierarchical", args.hierarchical),
                                        ("strong scaling", args.strong)) if on)
        plots.scaling(args.plot, rows, f"{args.params / 1e9:g} B parameters, "
                                       f"{args.bandwidth:g} GB/s" + (f", {how}" if how else ""))


def _add_params_args(p):
    # --fit, not --params: memory and scaling take --params as a count of parameters
    p.add_argument("--fit", dest="params_file", metavar="FILE", default=None,
                   help="fitted JSON (default: ~/.cache/dpcore/cost.json if present)")
    p.add_argument("--alpha", type=float, default=None, metavar="us")
    p.add_argument("--bandwidth", type=float, default=None, metavar="GB/s")
    p.add_argument("--reduce-bandwidth", type=float, default=None, metavar="GB/s")


def _params(args):
    """Explicit numbers win, then a fitted file, then the illustrative defaults."""
    if args.alpha is not None or args.bandwidth is not None:
        alpha = args.alpha if args.alpha is not None else DEFAULT.alpha * 1e6
        bw = args.bandwidth if args.bandwidth is not None else 1 / DEFAULT.beta / 1e9
        return Params.from_rates(alpha, bw, args.reduce_bandwidth), "given on the command line"
    path = args.params_file
    if path and not os.path.isfile(path):
        raise ValueError(f"--fit {path}: no such file (write one with `mpiexec -n 2 python -m "
                         f"dpcore.cost fit --out {path}`)")
    try:
        fitted = load(path)
    except (ValueError, KeyError, TypeError) as e:  # not JSON, or not a fit's JSON
        raise ValueError(f"{path or default_path()} is not a fit written by `python -m "
                         f"dpcore.cost fit`: {type(e).__name__}: {e}") from None
    if fitted:
        return fitted, f"fitted, from {args.params_file or default_path()}"
    return DEFAULT, "illustrative defaults (run `mpiexec -n 2 python -m dpcore.cost fit`)"


def run_predict(args):
    params, source = _params(args)
    sizes = args.sizes
    n, kw = args.ranks, {"local_size": args.local_size}
    algos = [a for a in algorithms(args.coll) if a != "hierarchical" or args.local_size]
    print(f"{args.coll} on {n} ranks, predicted time; parameters {source}")
    if isinstance(params, Params):
        print(f"  {params.describe()}")
    else:
        for a, p in params.items():
            print(f"  {a}: {p.describe()}")
        print("  (the other algorithms borrow the ring's numbers; the best is chosen among the "
              "fitted ones)")
    print()
    print(f"{'algorithm':<20}" + "".join(f"{fmt_bytes(s, binary=True):>12}" for s in sizes)
          + f"   cost at {fmt_bytes(sizes[-1], binary=True)}")
    # dpcore's one_shot slot holds DPCORE_ONE_SHOT_BYTES (256 KiB) per rank
    limits = {"one_shot": ONE_SHOT_LIMIT * (n if args.coll == "all_gather" else 1)}
    # with fitted numbers, choose among the algorithms dpcore runs (and was measured on)
    choices = algos if isinstance(params, Params) else [a for a in algos if a in params]
    best = {s: best_algorithm(args.coll, s, n, params, choices, limits, **kw) for s in sizes}
    for a in algos:
        times = [fmt_time(predict(args.coll, a, s, n, params, **kw)) +
                 ("*" if best[s][0] == a else " ") for s in sizes]
        cells = "".join(f"{t:>12}" for t in times)
        print(f"{a:<20}{cells}   {cost(args.coll, a, sizes[-1], n, **kw).describe()}")
    print(f"\n* best by the model (one_shot only up to its {fmt_bytes(ONE_SHOT_LIMIT, True)} "
          "slot per rank):")
    for s in sizes:
        print(f"  {fmt_bytes(s, binary=True):>8}: {best[s][1]}")
    other = beyond(args.coll)  # the ring, or direct where no ring runs the collective
    x = crossover(args.coll, "one_shot", other, n, params, **kw)
    if x:
        print(f"\none_shot and {other} cross at {fmt_bytes(x, binary=True)} "
              "(dpcore's algo='auto' switches there when these are fitted parameters, "
              "else at DPCORE_ONE_SHOT_MAX, 4 KiB by default)")


if __name__ == "__main__":
    run_main(main)
