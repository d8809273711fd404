"""The nccl-tests harness (src/common.cu), once for all collectives.

For each size from -b to -e (times -f): allocate, fill exact inputs, then for out-of-place and
in-place call once untimed (-a auto: _C.TUNER_SETTLE_CALLS times, until its tuner has tried
both algorithms), time ITERS back-to-back calls after a barrier and keep the slowest rank's
time (MPI MAX of the elapsed times), as nccl-tests does. With --compare mpi the same buffers go
through MPI's own collective, alternating with ours block by block; with --repeat R each block
runs R times and the medians are reported. With -c 1 the data are re-initialised and the
collective runs once more, and every rank counts the elements whose bits differ from the
result it computed itself; #wrong is the sum over ranks.

algbw = size / time (size as nccl-tests prints it); busbw = algbw * the collective's factor.

Beside each row: the algorithm that ran most of the in-place timed calls (for -a auto, as the
communicator picked them: the tuner may switch between ring and direct) and, when
a fitted cost model exists (dpcore.cost.load(), or --model FILE), pred_us (the model's time for
that algorithm and size) and model_err% = (pred_us - in-place time) / in-place time. --plot
draws busbw against size (plot.py).
"""
import argparse
import json
import os
import re
import socket
import statistics
import sys

import numpy as np

from .. import _C
from ..comm import Communicator
from ..dtypes import ALGORITHM_NAMES, DTYPES, parse_dtype
from ..sharding import shard_range
from .blocks import timed
from .collectives import COLLECTIVES, Case, dtype_name, mpi_supported

# A block of timed calls moves at most this many bytes per rank unless -n is given, so big sizes
# take fewer iterations and the default sweep stays short on a small machine.
_AUTO_ITER_BYTES = 256 << 20
_DEFAULT_ITERS = 20

_DTYPE_ALIASES = {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32",
                  "fp32": "float32", "double": "float64", "fp64": "float64", "char": "int8",
                  "int": "int32"}
_OPS = ("sum", "prod", "max", "min", "avg")


def parse_size(text):
    """Bytes from nccl-tests' notation: 8, 1K, 64M, 1G (powers of 1024; an optional B)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kKmMgG]?)[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (examples: 8, 1K, 64M, 1G)")
    unit = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(float(m.group(1)) * unit)


def _dtype_names(text):
    if text == "all":
        return [dtype_name(d) for d in sorted(DTYPES, key=DTYPES.get)]
    name = _DTYPE_ALIASES.get(text, text)
    try:
        dtype = parse_dtype(name)
    except (TypeError, ValueError) as e:
        raise argparse.ArgumentTypeError(f"unsupported dtype {text!r}: {e}")
    if dtype not in DTYPES:
        names = ", ".join(dtype_name(d) for d in sorted(DTYPES, key=DTYPES.get))
        raise argparse.ArgumentTypeError(f"unsupported dtype {text!r}; supported: {names}")
    return [name]


def _op_names(text):
    if text == "all":
        return list(_OPS)
    if text not in _OPS:
        raise argparse.ArgumentTypeError(f"unknown op {text!r}; expected {', '.join(_OPS)}, all")
    return [text]


def parser(collective=None):
    p = argparse.ArgumentParser(
        prog=f"{collective}_perf" if collective else "python -m dpcore.bench",
        description="nccl-tests style benchmark of dpcore's collectives; run under mpiexec -n N")
    if collective is None:
        p.add_argument("collective", choices=list(COLLECTIVES))
    p.add_argument("-b", "--minbytes", type=parse_size, default=8, help="default 8")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("64M"),
                   help="default 64M")
    p.add_argument("-f", "--stepfactor", type=int, default=4,
                   help="multiply the size by this each step (default 4; 1: add -i)")
    p.add_argument("-i", "--stepbytes", type=parse_size, default=parse_size("1M"),
                   help="bytes added per step when -f is 1 (default 1M)")
    p.add_argument("-n", "--iters", type=int, default=None,
                   help=f"timed calls per block (default {_DEFAULT_ITERS}, fewer for sizes "
                        f"above {_AUTO_ITER_BYTES // _DEFAULT_ITERS >> 20} MiB; "
                        "a given -n is used as is)")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="default 5")
    p.add_argument("-c", "--check", type=int, default=1,
                   help="check results (count wrong elements) this many times, default 1")
    p.add_argument("-d", "--datatype", type=_dtype_names, default=["float32"],
                   help="float32 (default), float16, bfloat16, float64, int8, uint8, int32, "
                        "int64, or all")
    p.add_argument("-o", "--op", type=_op_names, default=["sum"],
                   help="sum (default), prod, max, min, avg, or all")
    p.add_argument("-r", "--root", type=int, default=0, help="broadcast root (default 0)")
    algos = ("auto",) + tuple(Communicator.algorithms) + ("direct",)
    p.add_argument("-a", "--algo", default="auto", choices=algos,
                   help=f"{', '.join(algos)} (default auto)")
    p.add_argument("-R", "--register", type=int, choices=[0, 1], default=0,
                   help="1: dpcore's buffers come from comm.alloc, which every rank maps, as "
                        "nccl-tests' -R registers them (MPI keeps ordinary buffers, on which "
                        "it is faster); default 0")
    p.add_argument("--one-buffer", action="store_true",
                   help="allocate the buffers once, at -e's size, and time every size on their "
                        "front, as nccl-tests does (default: fresh buffers per size). Large "
                        "allocations get huge pages, which speed up MPI's kernel copies")
    p.add_argument("--compare", choices=["mpi"], default=None,
                   help="also time MPI's own collective on the same buffers (-R 1: ordinary "
                        "ones), alternating")
    p.add_argument("--repeat", type=int, default=1,
                   help="run each timed block this many times (alternating) and report medians")
    p.add_argument("--json", metavar="FILE", default=None, help="write every row as JSON")
    p.add_argument("--model", metavar="FILE", default=None,
                   help="fitted cost model (JSON from `python -m dpcore.cost fit --out FILE`) "
                        "for the pred_us and model_err%% columns and for -a auto's choice; "
                        "default: the fit's default file, if there is one")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="draw busbw against size for dpcore, MPI (--compare mpi) and the "
                        "model (needs matplotlib)")
    return p


def _sizes(args):
    size = args.minbytes
    while size <= args.maxbytes:
        yield size
        if args.stepfactor > 1:
            size *= args.stepfactor
        else:
            size += max(args.stepbytes, 1)


def huge_page_buffer(nbytes):
    """nbytes of touched memory from a 2 MiB boundary, so that its front can sit in one huge
    page (NumPy asks for them for allocations this large): nccl-tests' layout, where buffers
    are allocated once at the largest size."""
    huge = 2 << 20
    raw = np.ones(nbytes + huge, np.uint8)
    start = -raw.ctypes.data % huge
    return raw[start:start + nbytes]


def _iters(args, nbytes):
    if args.iters is not None:
        return args.iters
    return max(2, min(_DEFAULT_ITERS, _AUTO_ITER_BYTES // max(nbytes, 1)))


class Bench:
    """One run: a communicator, an MPI communicator for timing and comparison, the options."""

    def __init__(self, comm, coll, args):
        from mpi4py import MPI

        self.comm, self.coll, self.args = comm, coll, args
        self.mpi = MPI.COMM_WORLD.Dup()
        self.max_op = MPI.MAX
        self.n, self.rank = self.mpi.Get_size(), self.mpi.Get_rank()
        self.rows = []
        self.model, self.model_info, self.model_path = None, None, None  # {algo: Params}
        self._pool, self._pool_used = None, 0  # --one-buffer's two buffers; how many a row took

    def use_model(self, params, info, path):
        self.model, self.model_info, self.model_path = params, info, path

    def say(self, text=""):
        if self.rank == 0:
            print(text, flush=True)

    # -- measuring ----------------------------------------------------------------------------

    def _buffers(self, case, in_place, empty=np.empty):
        """(send, recv) as nccl-tests lays them out: in place, the smaller is the rank's shard
        of the larger (reduce_scatter: out = x[start:stop]; all_gather: s = out[start:stop]).
        empty(count, dtype) makes each buffer."""
        if not (in_place or self.coll.in_place_only):
            return empty(case.send_count, case.dtype), empty(case.recv_count, case.dtype)
        big = empty(max(case.send_count, case.recv_count), case.dtype)
        if case.send_count == case.recv_count:
            return big, big
        small = min(case.send_count, case.recv_count)
        start, stop = shard_range(big.size, self.n, self.rank)
        assert stop - start == small
        view = big[start:stop]
        return (big, view) if case.send_count > case.recv_count else (view, big)

    def _front_of_pool(self, count, dtype):
        """--one-buffer: the front of one of two buffers allocated once at -e's size (with room
        for the elements a count rounds up to), as nccl-tests' send and receive buffers."""
        if self._pool is None:
            self._pool = [huge_page_buffer(self.args.maxbytes + 4096) for _ in range(2)]
        buf = self._pool[self._pool_used]
        self._pool_used += 1
        return buf[:count * dtype.itemsize].view(dtype)

    def _shared_empty(self, count, dtype):
        """-R 1's buffers: comm.alloc is collective and wants the same size on every rank, so
        each rank takes the longest rank's count (shards differ by one) and uses its own."""
        return self.comm.alloc(self.mpi.allreduce(count, op=self.max_op), dtype)[:count]

    def _fill(self, case, send, recv, expected):
        """Poison the output (every element wrong), then write the input (which may overlap)."""
        if expected is not None:
            bits = _bits(recv)
            bits[...] = _bits(expected) ^ 1
        self.coll.init(send, case)

    def _wrong(self, case, send, recv, expected):
        self._fill(case, send, recv, expected)
        self.coll.run(self.comm, send, recv, case)
        local = int(np.count_nonzero(_bits(recv) != _bits(expected)))
        return self.mpi.allreduce(local)

    def measure(self, case, in_place):
        """{time, mpi_time, wrong} for one placement of one row; times in seconds."""
        args, coll = self.args, self.coll
        empty = (self._shared_empty if args.register else
                 self._front_of_pool if args.one_buffer else np.empty)
        self._pool_used = 0
        send, recv = self._buffers(case, in_place, empty)
        expected = coll.expected(case) if args.check > 0 else None
        self._fill(case, send, recv, expected)
        ours = lambda: coll.run(self.comm, send, recv, case)  # noqa: E731
        compare = args.compare == "mpi" and mpi_supported(coll, case)
        mpi_send, mpi_recv = send, recv
        if compare and args.register:
            mpi_send, mpi_recv = self._buffers(case, in_place)
            self._fill(case, mpi_send, mpi_recv, None)
        theirs = lambda: coll.run_mpi(self.mpi, mpi_send, mpi_recv, case, in_place)  # noqa: E731
        iters = _iters(args, max(case.send_count, case.recv_count) * case.dtype.itemsize)
        # auto's tuner starts each new kind of call with a run of both algorithms: those run
        # untimed, or a big row (2-4 calls a block) would time the tuner's trial of the slower
        for _ in range(_C.TUNER_SETTLE_CALLS if args.algo == "auto" else 1):
            ours()
        if compare:
            theirs()
        times, mpi_times = [], []
        before = self.comm.algorithm_calls()
        for _ in range(max(args.repeat, 1)):  # alternate: ours, MPI, ours, MPI, ...
            times.append(timed(self.mpi, ours, iters))
            if compare:
                mpi_times.append(timed(self.mpi, theirs, iters))
        ran = {a: k - before.get(a, 0) for a, k in self.comm.algorithm_calls().items()}
        wrong = None
        for _ in range(args.check):
            wrong = self._wrong(case, send, recv, expected)
            if wrong:
                break
        return {"time": statistics.median(times), "iters": iters, "wrong": wrong,
                "mpi_time": statistics.median(mpi_times) if mpi_times else None,
                "algo": max(ran, key=ran.get) if any(ran.values()) else None}

    def warm_up(self, case_for):
        """nccl-tests' warm-up: -w calls at the largest, then the smallest size."""
        sizes = list(_sizes(self.args))
        for nbytes in (sizes[-1], sizes[0]) if sizes else ():
            case = case_for(nbytes)
            send, recv = self._buffers(case, in_place=False)
            self.coll.init(send, case)
            for _ in range(self.args.warmup_iters):
                try:
                    self.coll.run(self.comm, send, recv, case)
                except ValueError:  # e.g. past -a one_shot's limit; the sweep will say so
                    break
                if self.args.compare == "mpi" and mpi_supported(self.coll, case):
                    self.coll.run_mpi(self.mpi, send, recv, case, False)

    # -- one (dtype, op) sweep, as nccl-tests' TimeTest -----------------------------------------

    def time_test(self, dtype_text, op):
        coll, args = self.coll, self.args
        dtype = parse_dtype(dtype_text)
        op_name = op if coll.reduces else "none"
        root = args.root if coll.rooted else -1

        def case_for(nbytes):
            count = nbytes // dtype.itemsize
            return Case(dtype, op, max(root, 0), args.algo, self.n, self.rank, count,
                        coll.sizes(count, self.n))

        factor = coll.bus_factor(self.n)
        self.warm_up(case_for)
        for nbytes in _sizes(args):
            case = case_for(nbytes)
            size = max(case.send_count, case.recv_count) * dtype.itemsize
            row = {"collective": coll.name, "nranks": self.n, "size": size,
                   "count": case.count_column, "type": case.dtype_name, "redop": op_name,
                   "root": root, "algo": args.algo, "transport": self.comm.transport}
            for label, in_place in (("oop", False), ("ip", True)):
                m = self.measure(case, in_place)
                row[f"{label}_algo"] = m["algo"]
                row[f"{label}_iters"] = m["iters"]
                row.update(_columns(label, size, m["time"], factor))
                row[f"{label}_wrong"] = m["wrong"]
                if args.compare == "mpi":  # ratio = our busbw / MPI's = MPI's time / ours
                    row.update(_columns(f"{label}_mpi", size, m["mpi_time"], factor))
                    row[f"{label}_ratio"] = (m["mpi_time"] / m["time"]
                                             if m["mpi_time"] and m["time"] else None)
            row["algo_used"] = row["ip_algo"] or algo_used(self.comm, coll.name, size, args.algo)
            if self.model is not None:
                row.update(_model_columns(self.model, coll.name, row))
            self.rows.append(row)
            self.say(_format_row(row, args.compare == "mpi", self.model is not None))

    # -- header and summary -------------------------------------------------------------------

    def header(self):
        a = self.args
        step = f"{a.stepfactor}(factor)" if a.stepfactor > 1 else f"{a.stepbytes}(bytes)"
        iters = a.iters if a.iters is not None else f"{_DEFAULT_ITERS}(auto)"
        self.say(f"# dpcore.bench {self.coll.name}  nranks {self.n}  minBytes {a.minbytes} "
                 f"maxBytes {a.maxbytes} step: {step} warmup iters: {a.warmup_iters} "
                 f"iters: {iters} validation: {a.check} algo: {a.algo} "
                 f"compare: {a.compare or 'none'} repeat: {a.repeat} "
                 f"register: {a.register} one-buffer: {int(a.one_buffer)}")
        self.say("#")
        self.say("# Using devices")
        c = self.comm
        line = (f"#  Rank {self.rank:2d} Pid {os.getpid():6d} on {socket.gethostname():>10s} "
                f"transport {c.transport} local rank {c.local_rank}/{c.local_size}")
        lines = self.mpi.gather(line, root=0)
        if self.rank == 0:
            print("\n".join(lines), flush=True)
        self.say("#")
        for line in self.model_info or ():
            self.say(line)
        self.say(_table_header(a.compare == "mpi", self.model is not None))

    def summary(self):
        wrong = sum(r[f"{p}_wrong"] or 0 for r in self.rows for p in ("oop", "ip"))
        bws = [r[f"{p}_busbw"] for r in self.rows for p in ("oop", "ip")]
        avg = sum(bws) / len(bws) if bws else 0.0
        self.say(f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}")
        self.say(f"# Avg bus bandwidth    : {avg:g}")
        result = {"wrong": wrong, "avg_busbw": avg}
        if self.args.compare == "mpi":
            mpi = [r[f"{p}_mpi_busbw"] for r in self.rows for p in ("oop", "ip")
                   if r.get(f"{p}_mpi_busbw") is not None]
            mpi_avg = sum(mpi) / len(mpi) if mpi else None
            self.say(f"# Avg MPI bus bandwidth: "
                     f"{'n/a' if mpi_avg is None else format(mpi_avg, 'g')}"
                     "   (MPI columns: in-place; out-of-place ones are in --json)")
            result["avg_mpi_busbw"] = mpi_avg
        errors = [(r["size"], abs(r["model_err%"])) for r in self.rows
                  if r.get("model_err%") is not None]
        if errors:
            large = [e for s, e in errors if s >= _LARGE]
            text = f"median |model_err%| {statistics.median(e for _, e in errors):.0f} % " \
                f"over {len(errors)} sizes"
            if large:
                text += f", {statistics.median(large):.0f} % from {_LARGE >> 10} KiB up"
            self.say(f"# Model error          : {text}")
            result["median_abs_model_err%"] = statistics.median(e for _, e in errors)
        self.say("#")
        return result


def algo_used(comm, coll_name, nbytes, algo):
    """The algorithm the communicator runs for a call of nbytes (as its _algo sees them: the
    whole buffer S): `algo` itself, or what "auto" picks."""
    if algo != "auto":
        return algo
    return ALGORITHM_NAMES[comm._algo("auto", nbytes, coll_name)]


_LARGE = 64 << 10  # the model is meant to be within 25 % from here up (issue 5)


def _model_columns(params, coll_name, row):
    """pred_us: the model's time for the algorithm that ran; model_err%: against in-place."""
    from ..cost import predict

    pred = predict(coll_name, row["algo_used"], row["size"], row["nranks"], params) * 1e6
    measured = row["ip_time_us"]
    err = (pred - measured) / measured * 100 if measured else None
    return {"pred_us": pred, "model_err%": err}


def load_model(path, n, parser):
    """({algo: Params} or None, header lines, path): --model FILE, else the fit's default
    file."""
    from ..cost import default_path, load
    from ..cost.auto import use_params

    explicit = path is not None
    path = path or default_path()
    where = f"--model {path}" if explicit else path
    try:
        params, doc = load(path) or None, {}
        if params:
            with open(path) as f:
                doc = json.load(f)
    except (OSError, ValueError, KeyError, TypeError) as e:
        parser.error(f"{where}: cannot read a fitted cost model: {e}")
    if params is None:
        if explicit:
            parser.error(f"{where}: no such file (or no algorithms in it)")
        return None, [f"# no fitted cost model: `mpiexec -n {max(n, 2)} python -m dpcore.cost "
                      "fit` adds pred_us and model_err% columns (or --model FILE)", "#"], None
    if explicit:  # -a auto then chooses by the same model the columns predict with
        use_params(params, path, doc.get("transport"))
    fitted = ", ".join(f"{k} {doc[k]}" for k in ("ranks", "transport", "dtype", "created")
                       if k in doc)
    return params, [f"# model: {path} ({fitted}); pred_us = alpha-beta time of the algorithm "
                    "run, model_err% = (pred_us - in-place time) / in-place time", "#"], path


def _bits(a):
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _columns(prefix, size, seconds, factor):
    """time (us), algbw = size / time and busbw = algbw * factor (GB/s); None when not run."""
    if seconds is None:
        return {f"{prefix}_time_us": None, f"{prefix}_algbw": None, f"{prefix}_busbw": None}
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return {f"{prefix}_time_us": seconds * 1e6, f"{prefix}_algbw": algbw,
            f"{prefix}_busbw": algbw * factor}


# -- the table, in nccl-tests' layout ---------------------------------------------------------

_PARAMS = "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}"
_BLOCK = "  {:>7}  {:>6}  {:>6}  {:>6}"
_MPI_BLOCK = "  {:>8}  {:>9}  {:>5}"
_ALGO_BLOCK = "  {:>8}"
_MODEL_BLOCK = "  {:>8}  {:>10}"


def _table_header(compare, model=False):
    params_width = len(_PARAMS.format(*[""] * 5))
    block_width = len(_BLOCK.format(*[""] * 4))
    meta = "#" + " " * (params_width - 1) + "out-of-place".center(block_width)
    meta += "in-place".center(block_width)
    names = "#" + _PARAMS.format("size", "count", "type", "redop", "root")[1:]
    units = "#" + _PARAMS.format("(B)", "(elements)", "", "", "")[1:]
    for _ in range(2):
        names += _BLOCK.format("time", "algbw", "busbw", "#wrong")
        units += _BLOCK.format("(us)", "(GB/s)", "(GB/s)", "")
    if compare:
        meta += "MPI in-place".center(len(_MPI_BLOCK.format(*[""] * 3)))
        names += _MPI_BLOCK.format("mpi time", "mpi busbw", "ratio")
        units += _MPI_BLOCK.format("(us)", "(GB/s)", "")
    meta += " " * len(_ALGO_BLOCK.format(""))
    names += _ALGO_BLOCK.format("algo")
    units += _ALGO_BLOCK.format("")
    if model:
        meta += "model".center(len(_MODEL_BLOCK.format("", "")))
        names += _MODEL_BLOCK.format("pred_us", "model_err%")
        units += _MODEL_BLOCK.format("(us)", "(%)")
    return "\n".join((meta.rstrip(), names, units.rstrip()))


def _time_text(us):
    if us is None:
        return "n/a"
    return f"{us:.0f}" if us >= 10000 else f"{us:.1f}" if us >= 100 else f"{us:.2f}"


def _num(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def _format_row(row, compare, model=False):
    text = _PARAMS.format(row["size"], row["count"], row["type"], row["redop"], row["root"])
    for p in ("oop", "ip"):
        wrong = row[f"{p}_wrong"]
        text += _BLOCK.format(_time_text(row[f"{p}_time_us"]), _num(row[f"{p}_algbw"]),
                              _num(row[f"{p}_busbw"]), "n/a" if wrong is None else wrong)
    if compare:
        text += _MPI_BLOCK.format(_time_text(row["ip_mpi_time_us"]),
                                  _num(row["ip_mpi_busbw"]), _num(row["ip_ratio"]))
    text += _ALGO_BLOCK.format(row["algo_used"])
    if model:
        text += _MODEL_BLOCK.format(_time_text(row["pred_us"]), _num(row["model_err%"], "+.0f"))
    return text


# -- entry point ------------------------------------------------------------------------------

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
    if args.one_buffer and args.register:
        p.error("--one-buffer and -R 1 choose dpcore's buffers two ways: pick one")
    if args.plot:
        from .plot import check_matplotlib

        try:
            check_matplotlib()
        except ImportError as e:
            p.error(str(e))
    coll = COLLECTIVES[collective or args.collective]
    ops = args.op if coll.reduces else ["sum"]
    model = load_model(args.model, MPI.COMM_WORLD.Get_size(), p)
    with dpcore.init() as comm:
        bench = Bench(comm, coll, args)
        bench.use_model(*model)
        if coll.rooted and not 0 <= args.root < bench.n:
            bench.say(f"# root {args.root} is not a rank in [0, {bench.n})")
            return 2
        bench.header()
        for dtype_text in args.datatype:
            for op in ops:
                if op == "avg" and parse_dtype(dtype_text).kind in "iu":
                    continue  # avg needs a floating dtype
                try:
                    bench.time_test(dtype_text, op)
                except ValueError as e:  # e.g. -a one_shot past its size: same on every rank
                    bench.say(f"# {dtype_text} {op}: stopped: {e}")
        result = bench.summary()
        if args.json and bench.rank == 0:
            one = lambda names: names[0] if len(names) == 1 else names  # noqa: E731
            doc = {"collective": coll.name, "nranks": bench.n, "dtype": one(args.datatype),
                   "op": one(ops) if coll.reduces else None, "algo": args.algo,
                   "transport": comm.transport, "compare": args.compare,
                   "repeat": args.repeat, "args": vars(args), "rows": bench.rows, **result}
            if bench.model is not None:
                doc["model"] = os.path.abspath(bench.model_path)
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1)
        if args.plot and bench.rank == 0 and bench.rows:
            from .plot import plot

            plot(args.plot, bench.rows, coll, comm.transport, args.compare == "mpi")
            print(f"# plot: {args.plot}", flush=True)
        bench.mpi.Free()
    return 1 if result["wrong"] else 0


def run(argv=None, collective=None):
    """main(), but an exception on one rank aborts the whole job instead of hanging the rest."""
    try:
        status = main(argv, collective)
    except SystemExit:
        raise
    except BaseException:
        import traceback

        from mpi4py import MPI

        traceback.print_exc()
        sys.stderr.flush()
        if MPI.COMM_WORLD.Get_size() > 1:
            MPI.COMM_WORLD.Abort(1)
        raise
    sys.exit(status)
