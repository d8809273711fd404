"""How data parallelism scales: compute per step against the gradient all-reduce.

Assumptions, printed with every table:
- weak scaling (the usual data-parallel setting): every rank keeps its batch, so compute per
  step is constant and the global batch grows with the ranks; --strong instead fixes the global
  batch and divides its compute by the ranks.
- one all-reduce of all gradients per step (grad_bytes per parameter) by the ring, or by the
  hierarchical algorithm with k ranks per node (fast link inside a node, the network between).
- without overlap the step is compute + all-reduce; with overlap the all-reduce hides behind
  the backward pass (about 2/3 of the compute: backward costs twice the forward) except the
  last bucket's, which can only start when backward ends (DDP's buckets).
Efficiency = ideal step time (compute alone) / predicted step time; speed-up = ranks x that.
"""
import textwrap
from dataclasses import dataclass

from .formulas import cost
from .params import Params
from .units import fmt_bytes, fmt_count, fmt_time

BACKWARD_SHARE = 2 / 3


@dataclass
class Row:
    ranks: int
    compute: float      # seconds of compute per step on one rank
    comm: float         # the gradient all-reduce
    latency: float      # its alpha terms
    exposed: float      # the part of comm not hidden behind backward
    step: float
    share: float        # exposed / step
    efficiency: float
    speedup: float


def _allreduce(nbytes, n, link, node, local_size):
    """(seconds, seconds of it spent on alpha) for the gradient all-reduce."""
    if local_size and n > 1:
        k = min(local_size, n)
        if n % k:
            raise ValueError(f"{n} ranks do not split into nodes of {k}")
        p = Params(node.alpha, node.beta, link.gamma, link.alpha, link.beta)
        c = cost("all_reduce", "hierarchical", nbytes, n, local_size=k)
    else:
        p, c = link, cost("all_reduce", "ring", nbytes, n)
    return p.time(c), p.latency(c)


def predict_scaling(num_params, ranks, link, step_flops, flops_per_rank, grad_bytes=2,
                    overlap=False, local_size=None, node=None, strong=False, bucket_bytes=25e6):
    """One Row per rank count. link: Params of the network (alpha, beta, gamma); node: Params
    of the link inside a node (used with local_size, the hierarchical all-reduce)."""
    nbytes = float(num_params) * grad_bytes
    rows = []
    for n in ranks:
        compute = step_flops / flops_per_rank / (n if strong else 1)
        comm, latency = _allreduce(nbytes, n, link, node, local_size)
        exposed = comm
        if overlap:
            last_bucket = _allreduce(min(bucket_bytes, nbytes), n, link, node, local_size)[0]
            exposed = max(comm - BACKWARD_SHARE * compute, last_bucket if n > 1 else 0)
        step = compute + exposed
        eff = compute / step
        rows.append(Row(n, compute, comm, latency, exposed, step, exposed / step, eff, n * eff))
    return rows


def report(num_params, ranks, link, step_flops, flops_per_rank, grad_bytes=2, overlap=False,
           local_size=None, node=None, strong=False, tokens=None, bucket_bytes=25e6):
    """The table `python -m dpcore.cost scaling` prints, with its assumptions and a reading."""
    rows = predict_scaling(num_params, ranks, link, step_flops, flops_per_rank, grad_bytes,
                           overlap, local_size, node, strong, bucket_bytes)
    nbytes = float(num_params) * grad_bytes
    flops = (f"6 x params x {tokens:g} tokens = " if tokens else "") + f"{step_flops:.3g} FLOP"
    if strong:
        compute = [f"{flops} per global batch at {flops_per_rank / 1e12:.4g} TFLOP/s per rank",
                   "(strong scaling: the global batch is fixed and divided among the ranks)"]
    else:
        compute = [f"{flops} per rank per step at {flops_per_rank / 1e12:.4g} TFLOP/s",
                   "(weak scaling: fixed batch per rank, the global batch grows with the ranks)"]
    algo = "ring all-reduce"
    if local_size:
        algo = (f"hierarchical all-reduce, {local_size} ranks per node\n"
                f"  in a node: {node.describe()}")
    lines = [
        f"Data-parallel scaling: {fmt_count(num_params)} parameters, "
        f"{'fp32' if grad_bytes == 4 else 'fp16'} gradients = {fmt_bytes(nbytes)} all-reduced "
        "per step",
        f"  compute : {compute[0]}", f"            {compute[1]}",
        f"  network : {link.describe()}; {algo}",
        "  overlap : " + ("the all-reduce hides behind backward (2/3 of compute), except the last "
                          f"{fmt_bytes(bucket_bytes)} bucket" if overlap
                          else "none (step = compute + all-reduce)"),
        "",
        f"{'ranks':>6}  {'compute':>9}  {'all-reduce':>10}  {'(latency)':>10}  "
        f"{'exposed':>9}  {'step':>9}  {'comm share':>10}  {'efficiency':>10}  {'speed-up':>9}"]
    lines += [f"{r.ranks:>6}  {fmt_time(r.compute):>9}  {fmt_time(r.comm):>10}  "
              f"{'(' + fmt_time(r.latency) + ')':>10}  {fmt_time(r.exposed):>9}  "
              f"{fmt_time(r.step):>9}  {r.share:>10.0%}  {r.efficiency:>10.2f}  "
              f"{r.speedup:>8.1f}x" for r in rows]
    lines += [""] + [textwrap.fill(p, 100, initial_indent="  ", subsequent_indent="  ")
                     for p in _reading(rows[-1], local_size, overlap)]
    return "\n".join(lines)


def _reading(last, local_size, overlap):
    """What the last row says, in words."""
    n = last.ranks
    out = [f"At {n} ranks the all-reduce takes {fmt_time(last.comm)}: {fmt_time(last.latency)} "
           "of latency (the alpha terms, growing with the ranks) and the rest bandwidth."]
    if local_size:
        out.append(f"Hierarchical: the network carries 2(N-1)/N x S/{local_size} per rank "
                   f"instead of the flat ring's 2(n-1)/n x S, {local_size} times less.")
    else:
        out.append("Ring: the bandwidth term 2(n-1)/n x S x beta approaches 2 S beta and stops "
                   "growing; the latency term 2(n-1) alpha grows linearly.")
    out.append(f"Efficiency {last.efficiency:.2f}: {last.share:.0%} of every step is "
               "communication that compute does not hide" + ("." if overlap else
                                                             " (try --overlap)."))
    return out
