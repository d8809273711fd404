"""The bench's rows: their columns (nccl-tests' layout, MPI's or NCCL's beside, the copy floor,
the model's prediction) and how they print."""
import json

import numpy as np



def algo_used(comm, coll_name, nbytes, algo):
    """The algorithm the communicator runs for a call of nbytes (the whole buffer S): `algo`
    itself, or what "auto" picks; "p2p" for sendrecv (no collective algorithm)."""
    if coll_name == "sendrecv":
        return "p2p"
    if algo != "auto":
        return algo
    return comm.algorithm_for(coll_name, nbytes)


LARGE_BYTES = 64 << 10  # the model is meant to be within 25 % from here up (issue 5)
# The CUDA collectives are meant to reach 60 % of the copy floor from here up (2 ranks, one GPU)
FLOOR_LARGE_BYTES = 64 << 20


def model_columns(params, coll_name, row):
    """pred_us: the model's time for the algorithm that ran (sendrecv: one message, priced with
    the ring's fitted numbers); model_err%: against in-place."""
    from ..cost import predict
    from ..cost.formulas import send_recv
    from ..cost.params import params_for

    if coll_name == "sendrecv":
        pred = params_for(params, "ring").time(send_recv(row["size"]), row["size"]) * 1e6
    else:
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
    if explicit:  # --algo auto then chooses by the same model the columns predict with
        use_params(params, path, doc.get("transport"))
    fitted = ", ".join(f"{k} {doc[k]}" for k in ("ranks", "transport", "dtype", "created")
                       if k in doc)
    return params, [f"# model: {path} ({fitted}); pred_us = alpha-beta time of the algorithm "
                    "run, model_err% = (pred_us - in-place time) / in-place time", "#"], path


def bits(a):
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def columns(prefix, size, seconds, factor):
    """time (us), algbw = size / time and busbw = algbw * factor (GB/s); None when not run."""
    if seconds is None:
        return {f"{prefix}_time_us": None, f"{prefix}_algbw": None, f"{prefix}_busbw": None}
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return {f"{prefix}_time_us": seconds * 1e6, f"{prefix}_algbw": algbw,
            f"{prefix}_busbw": algbw * factor}


# -- the table, in nccl-tests' layout ---------------------------------------------------------

_PARAMS = "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}"
_BLOCK = "  {:>7}  {:>6}  {:>6}  {:>6}"
_FLOOR_BLOCK = "  {:>8}  {:>7}  {:>7}"
_ALGO_BLOCK = "  {:>8}"
_MODEL_BLOCK = "  {:>8}  {:>10}"


def _ref_block(name):
    """The compared library's block: "mpi time", "mpi busbw", "ratio" (wider for "nccl")."""
    return f"  {{:>{max(8, len(name) + 5)}}}  {{:>{max(9, len(name) + 6)}}}  {{:>5}}"


def table_header(compare, model=False, floor=False, cputime=False):
    """compare: the compared library's name ("mpi", "nccl") or None; cputime: -C 1's time."""
    params_width = len(_PARAMS.format(*[""] * 5))
    block_width = len(_BLOCK.format(*[""] * 4))
    meta = "#" + " " * (params_width - 1) + "out-of-place".center(block_width)
    meta += "in-place".center(block_width)
    names = "#" + _PARAMS.format("size", "count", "type", "redop", "root")[1:]
    units = "#" + _PARAMS.format("(B)", "(elements)", "", "", "")[1:]
    for _ in range(2):
        names += _BLOCK.format("cputime" if cputime else "time", "algbw", "busbw", "#wrong")
        units += _BLOCK.format("(us)", "(GB/s)", "(GB/s)", "")
    if compare:
        block = _ref_block(compare)
        meta += f"{compare.upper()} in-place".center(len(block.format(*[""] * 3)))
        names += block.format(f"{compare} time", f"{compare} busbw", "ratio")
        units += block.format("(us)", "(GB/s)", "")
    if floor:
        meta += "copy floor".center(len(_FLOOR_BLOCK.format(*[""] * 3)))
        names += _FLOOR_BLOCK.format("floor", "copy bw", "reached")
        units += _FLOOR_BLOCK.format("(us)", "(GB/s)", "(%)")
    meta += " " * len(_ALGO_BLOCK.format(""))
    names += _ALGO_BLOCK.format("algo")
    units += _ALGO_BLOCK.format("")
    if model:
        meta += "model".center(len(_MODEL_BLOCK.format("", "")))
        names += _MODEL_BLOCK.format("pred_us", "model_err%")
        units += _MODEL_BLOCK.format("(us)", "(%)")
    return "\n".join((meta.rstrip(), names, units.rstrip()))


def time_text(us):
    if us is None:
        return "n/a"
    return f"{us:.0f}" if us >= 10000 else f"{us:.1f}" if us >= 100 else f"{us:.2f}"


def num(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def format_row(row, compare, model=False, floor=False, cputime=False):
    text = _PARAMS.format(row["size"], row["count"], row["type"], row["redop"], row["root"])
    for p in ("oop", "ip"):
        wrong = row[f"{p}_wrong"]
        time_us = row[f"{p}_cputime_us" if cputime else f"{p}_time_us"]
        text += _BLOCK.format(time_text(time_us), num(row[f"{p}_algbw"]),
                              num(row[f"{p}_busbw"]), "n/a" if wrong is None else wrong)
    if compare:
        text += _ref_block(compare).format(time_text(row[f"ip_{compare}_time_us"]),
                                           num(row[f"ip_{compare}_busbw"]), num(row["ip_ratio"]))
    if floor:
        text += _FLOOR_BLOCK.format(time_text(row["floor_time_us"]), num(row["floor_copy_gbps"]),
                                    num(row["ip_floor%"], ".0f"))
    text += _ALGO_BLOCK.format(row["algo_used"])
    if model:
        text += _MODEL_BLOCK.format(time_text(row["pred_us"]), num(row["model_err%"], "+.0f"))
    return text
