"""Model-state memory per rank under ZeRO (Rajbhandari et al., 2020, section 5).

psi parameters, N ranks, K bytes of optimizer state per parameter. Mixed-precision Adam keeps
fp16 weights (2 psi) and gradients (2 psi) plus fp32 master weights, momentum and variance
(K = 12): 16 psi bytes in all. Each stage shards one more of them over the N ranks:
    stage 0: 2 psi + 2 psi + K psi         stage 2: 2 psi + (2 + K) psi / N
    stage 1: 2 psi + 2 psi + K psi / N     stage 3: (2 + 2 + K) psi / N
fp32 Adam: 4 + 4 + 8 (weights, gradients, m and v). Activations, communication buffers and
fragmentation are not model states and come on top.
"""
import math
import textwrap

from .. import collectives
from .units import fmt_bytes, fmt_count

# bytes per parameter: (weights, gradients, optimizer state), and what they are
PRECISIONS = {
    "mixed": ((2, 2, 12), "2 weights (fp16) + 2 gradients (fp16) + 12 optimizer "
                          "(fp32 master weights, momentum, variance)"),
    "fp32": ((4, 4, 8), "4 weights + 4 gradients + 8 optimizer (momentum, variance), all fp32"),
}
SHARDS = {0: "nothing", 1: "optimizer", 2: "+ gradients", 3: "+ parameters"}


def _parts(stage, precision):
    """[(name, bytes per parameter, sharded over the ranks?)] at this stage."""
    (w, g, k), _ = PRECISIONS[precision]
    return [("params", w, stage >= 3), ("grads", g, stage >= 2), ("optimizer", k, stage >= 1)]


def zero_memory(num_params, ranks, stage, precision="mixed"):
    """{"params", "grads", "optimizer", "total"}: bytes per rank at this ZeRO stage."""
    m = {name: b * float(num_params) / (int(ranks) if sharded else 1)
         for name, b, sharded in _parts(stage, precision)}
    m["total"] = sum(m.values())
    return m


def min_ranks(num_params, stage, gpu_bytes, precision="mixed"):
    """Fewest ranks at which the model states fit in gpu_bytes, or None if no count does:
    the unsharded part U must fit, then N >= sharded part / (gpu - U)."""
    parts = _parts(stage, precision)
    unsharded = sum(b for _, b, s in parts if not s) * float(num_params)
    sharded = sum(b for _, b, s in parts if s) * float(num_params)
    if unsharded > gpu_bytes or (unsharded == gpu_bytes and sharded):
        return None
    return max(1, math.ceil(sharded / (gpu_bytes - unsharded))) if sharded else 1


def comm_per_step(num_params, ranks, stage, grad_bytes=2):
    """Bytes each rank sends per training step: a ring reduce-scatter plus all-gather moves
    2 (N-1)/N psi elements (stages 0-2), stage 3 gathers the parameters once more for the
    backward pass: 3 (N-1)/N psi (ZeRO paper, section 7)."""
    calls = ["reduce_scatter", "all_gather"] + ["all_gather"] * (stage == 3)
    sent = sum((collectives.algo_cost(c, "ring").bytes for c in calls), collectives.Amount())
    return sent.factor(int(ranks)) * float(num_params) * grad_bytes


def fmt_gb(b):
    return f"{b / 1e9:.1f} GB" if b >= 1e8 else fmt_bytes(b)


def report(num_params, ranks, stages=(0, 1, 2, 3), precision="mixed", gpu_gb=80.0):
    """The table `python -m dpcore.cost memory` prints, and what does not fit."""
    gpu, psi = gpu_gb * 1e9, float(num_params)
    per_param, what = PRECISIONS[precision]
    w = per_param[0]
    name = "mixed-precision" if precision == "mixed" else precision
    lines = [f"ZeRO model states per rank: {fmt_count(psi)} parameters on {ranks} ranks, "
             f"{name} Adam"]
    lines += textwrap.wrap(f"bytes per parameter: {what}", 100, initial_indent="  ",
                           subsequent_indent="    ")
    lines += ["", f"{'stage':<6}{'shards':<14}{'params':>10}{'grads':>10}{'optimizer':>11}"
                  f"{'total':>11}   {'fits ' + f'{gpu_gb:g} GB':<12}{'min ranks':<11}"
                  f"{'sent/rank/step':>14}"]
    for s in stages:
        m = zero_memory(psi, ranks, s, precision)
        need = min_ranks(psi, s, gpu, precision)
        fits = "yes" if m["total"] <= gpu else f"no ({m['total'] / gpu:.1f}x)"
        lines.append(f"{s:<6}{SHARDS[s]:<14}{fmt_gb(m['params']):>10}{fmt_gb(m['grads']):>10}"
                     f"{fmt_gb(m['optimizer']):>11}{fmt_gb(m['total']):>11}   {fits:<12}"
                     f"{'never' if need is None else need:<11}"
                     f"{fmt_gb(comm_per_step(psi, ranks, s, w)):>14}")
    notes = []
    if w * psi > gpu and any(s < 3 for s in stages):
        notes.append(f"! The {'fp16' if w == 2 else 'fp32'} weights alone take "
                     f"{fmt_gb(w * psi)} per rank below stage 3 (only stage 3 shards them): "
                     f"more than {gpu_gb:g} GB whatever the number of ranks.")
    if 3 in stages:
        total = sum(per_param)
        notes.append(f"Stage 3 holds {total} psi / N = {fmt_gb(total * psi / ranks)} per rank "
                     f"here; it fits {gpu_gb:g} GB from "
                     f"{min_ranks(psi, 3, gpu, precision)} ranks.")
    notes.append("Model states only: activations, communication buffers and fragmentation come "
                 "on top. sent/rank/step: the gradients' ring reduce-scatter + all-gather "
                 "(stage 3 gathers the parameters a second time, for backward).")
    lines.append("")
    lines += [textwrap.fill(note, 100, initial_indent="  ", subsequent_indent="    ")
              for note in notes]
    return "\n".join(lines)
