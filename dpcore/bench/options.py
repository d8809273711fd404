"""The bench's command line, with nccl-tests' flags and meanings (src/common.cu): -b -e -f -i -n
-m -w -N -c -d -o -r -z -T -C -a -J, plus dpcore's (--algo, -R, --one-buffer, --device,
--compare, --floor, --repeat, --json, --csv, --model, --plot). nccl-tests' GPU-only flags are
refused by name (gpu_only.py).

Where the defaults differ from nccl-tests' (docs/api.md says why): -b 8 -e 64M -f 4 (nccl-tests:
32M, 32M, no factor: one size), -n 20 but fewer for large sizes (nccl-tests: 20), -w 5
(nccl-tests' README: 5; its recent src/common.cu: 1), -a 3, the slowest rank (nccl-tests: 1, the
mean).
"""
import argparse

from .._cli.args import Parser, argument, whole
from ..comm.communicator import Communicator
from ..cost.units import parse_bytes
from ..dtypes import parse_dtype, supported
from .blocks import AVERAGES
from .collectives import TESTS
from .gpu_only import add_gpu_only
from .outputs import output_file
from .patterns import dtype_name

# A block of timed calls moves at most this many bytes per rank unless -n is given, so big sizes
# take fewer iterations and the default sweep stays short on a small machine.
AUTO_ITER_BYTES = 256 << 20
DEFAULT_ITERS = 20

_DTYPE_ALIASES = {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32",
                  "fp32": "float32", "double": "float64", "fp64": "float64", "char": "int8",
                  "int": "int32"}
_OPS = ("sum", "prod", "max", "min", "avg")


# Bytes in nccl-tests' notation: 8, 1K, 64M, 1G (powers of 1024), read as dpcore.cost reads them
parse_size = argument(parse_bytes)


def _dtype_names(text):
    if text == "all":
        return [dtype_name(d) for d in supported()]
    name = _DTYPE_ALIASES.get(text, text)
    try:
        dtype = parse_dtype(name)
    except (TypeError, ValueError) as e:
        raise argparse.ArgumentTypeError(f"unsupported dtype {text!r}: {e}")
    if dtype not in supported():
        names = ", ".join(dtype_name(d) for d in supported())
        raise argparse.ArgumentTypeError(f"unsupported dtype {text!r}; supported: {names}")
    return [name]


def _op_names(text):
    if text == "all":
        return list(_OPS)
    if text not in _OPS:
        raise argparse.ArgumentTypeError(f"unknown op {text!r}; expected {', '.join(_OPS)}, all")
    return [text]


def _root(text):
    """-r: a rank, or "all": every rank in turn (None here; the harness knows the ranks)."""
    if text == "all":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rank or all, not {text!r}") from None


def _switch(text):
    """nccl-tests' 0/1 flags (-z, -C): any whole number, nonzero meaning on, as strtol reads it."""
    return bool(whole(0)(text))


def _average(text):
    if text not in {str(k) for k in AVERAGES}:
        raise argparse.ArgumentTypeError(
            f"{text!r}: -a is nccl-tests' average mode, 0 to 3" +
            (f"; the algorithm is --algo {text}" if not text.isdigit() else ""))
    return int(text)


def parser(collective=None):
    p = Parser(
        prog=f"{collective}_perf" if collective else "python -m dpcore.bench",
        description="nccl-tests style benchmark of dpcore's collectives; run under mpiexec -n N")
    if collective is None:
        p.add_argument("collective", choices=list(TESTS))
    p.add_argument("-b", "--minbytes", type=parse_size, default=8, help="default 8")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("64M"),
                   help="default 64M")
    p.add_argument("-f", "--stepfactor", type=int, default=4,
                   help="multiply the size by this each step (default 4; 1: add -i)")
    p.add_argument("-i", "--stepbytes", type=parse_size, default=parse_size("1M"),
                   help="bytes added per step when -f is 1 (default 1M)")
    p.add_argument("-n", "--iters", type=int, default=None,
                   help=f"timed calls per block (default {DEFAULT_ITERS}, fewer for sizes "
                        f"above {AUTO_ITER_BYTES // DEFAULT_ITERS >> 20} MiB; "
                        "a given -n is used as is)")
    p.add_argument("-m", "--agg_iters", type=whole(1), default=1,
                   help="calls per timed iteration: each row's time is the block's over -n x -m "
                        "calls (nccl-tests groups them into one NCCL launch; dpcore has no group "
                        "call, so they are issued back to back)")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="default 5")
    p.add_argument("-N", "--run_cycles", type=whole(0), default=1,
                   help="run the whole sweep this many times, printing each (0: until killed)")
    p.add_argument("-c", "--check", type=int, default=1,
                   help="check results (count wrong elements) this many times, default 1")
    p.add_argument("-d", "--datatype", type=_dtype_names, default=["float32"],
                   help="float32 (default), float16, bfloat16, float64, int8, uint8, int32, "
                        "uint32, int64, uint64, or all")
    p.add_argument("-o", "--op", type=_op_names, default=["sum"],
                   help="sum (default), prod, max, min, avg, or all")
    p.add_argument("-r", "--root", type=_root, default=0,
                   help="the root of broadcast, reduce, gather and scatter, or all: each rank in "
                        "turn, a sweep each (default 0)")
    p.add_argument("-z", "--blocking", type=_switch, default=False,
                   help="1: wait for each call to end on every rank (the device synchronized, "
                        "then a barrier) before the next; the time includes the waits "
                        "(default 0)")
    p.add_argument("-T", "--timeout", type=whole(0), default=0,
                   help="seconds a collective may wait before the run fails, as dpcore.init's "
                        "timeout (default 0: dpcore's own, DPCORE_TIMEOUT)")
    p.add_argument("-C", "--report_cputime", type=_switch, default=False,
                   help="1: the time column is rank 0's CPU time, until its calls returned "
                        "(before waiting for a device); algbw and busbw stay the wall time's "
                        "(default 0)")
    algos = ("auto",) + tuple(Communicator.algorithms) + ("direct",)
    p.add_argument("--algo", default="auto", choices=algos,
                   help=f"{', '.join(algos)} (default auto)")
    p.add_argument("-a", "--average", type=_average, default=3,
                   help="the row's time, as nccl-tests' -a: " +
                        ", ".join(f"{k} {v}" for k, v in AVERAGES.items()) +
                        " (default 3: a collective ends with its last rank; nccl-tests: 1)")
    p.add_argument("-R", "--register", type=int, choices=[0, 1], default=0,
                   help="1: dpcore's buffers are mapped by every rank, as nccl-tests' -R "
                        "registers them: comm.alloc's on the host (MPI keeps ordinary buffers, "
                        "on which it is faster), ordinary ones registered with comm.register on "
                        "a GPU (algo direct then runs on them); default 0")
    p.add_argument("--one-buffer", action="store_true",
                   help="allocate the buffers once, at -e's size, and time every size on their "
                        "front, as nccl-tests does (default: fresh buffers per size). Large "
                        "allocations get huge pages, which speed up MPI's kernel copies")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the buffers live: cpu (NumPy arrays, default) or cuda (CuPy "
                        "arrays, each rank on GPU local rank %% GPU count of its node; needs "
                        "CuPy and a GPU, and implies --floor and --compare nccl)")
    p.add_argument("--compare", choices=["mpi", "nccl", "none"], default=None,
                   help="also time another library's collective on the same buffers, "
                        "alternating: mpi (MPI's own; -R 1: on ordinary buffers) or, with "
                        "--device cuda, nccl (through cupy.cuda.nccl; left out, and the header "
                        "says why, where a node has fewer GPUs than ranks). Default: none on "
                        "cpu, nccl on cuda")
    p.add_argument("--floor", action="store_true",
                   help="also time the copy floor, alternating with the in-place calls: a plain "
                        "copy, on every rank at once, of the bytes the ring moves through "
                        "memory (docs/busbw.md); prints its time, its copy bandwidth per rank "
                        "and the share of it reached. On with --device cuda")
    p.add_argument("--repeat", type=int, default=1,
                   help="run each timed block this many times (alternating) and report medians")
    p.add_argument("--json", metavar="FILE", default=None, help="write every row as JSON")
    p.add_argument("--csv", metavar="FILE", default=None,
                   help="write every row as CSV, one line per row, --json's keys as columns")
    p.add_argument("-J", "--output_file", metavar="FILE", type=output_file, default=None,
                   help="nccl-tests' spelling: --json FILE for FILE.json, --csv FILE for "
                        "FILE.csv")
    p.add_argument("--model", metavar="FILE", default=None,
                   help="fitted cost model (JSON from `python -m dpcore.cost fit --out FILE`) "
                        "for the pred_us and model_err%% columns and for --algo auto's choice; "
                        "default: the fit's default file, if there is one")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="draw busbw against size for dpcore, MPI (--compare mpi) and the "
                        "model (needs matplotlib)")
    add_gpu_only(p)
    return p


def sizes(args):
    size = args.minbytes
    while size <= args.maxbytes:
        yield size
        if args.stepfactor > 1:
            size *= args.stepfactor
        else:
            size += max(args.stepbytes, 1)


def iters_for(args, nbytes):
    if args.iters is not None:
        return args.iters
    return max(2, min(DEFAULT_ITERS, AUTO_ITER_BYTES // max(nbytes, 1)))
