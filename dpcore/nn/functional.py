"""Functions of Tensors, named and shaped like torch.nn.functional (so `dim`, not `axis`)."""
import numpy as np

from . import init
from ..tensor import Tensor, array_module


def relu(x):
    return x.relu()


def gelu(x, approximate="none"):
    return x.gelu(approximate)


def log_softmax(x, dim=-1):
    # Subtracting the row maximum keeps exp() finite; it is a constant here because the shift
    # cancels exactly in log_softmax, so its gradient would be zero anyway.
    shifted = x - x.data.max(axis=dim, keepdims=True)
    return shifted - shifted.exp().sum(axis=dim, keepdims=True).log()


def softmax(x, dim=-1):
    e = (x - x.data.max(axis=dim, keepdims=True)).exp()
    return e / e.sum(axis=dim, keepdims=True)


def _reduce(losses, reduction):
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "none":
        return losses
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', not {reduction!r}")


def cross_entropy(logits, target, reduction="mean"):
    """logits (N, C), target (N,) class indices. reduction="sum" lets data-parallel code with
    uneven local batches weight each rank so the average gradient is the full batch's."""
    target = target.data if isinstance(target, Tensor) else target
    xp = array_module(logits.data)
    target = xp.asarray(target)
    picked = log_softmax(logits, dim=-1)[xp.arange(target.shape[0]), target]
    return _reduce(-picked, reduction)


def mse_loss(input, target, reduction="mean"):
    d = input - target
    return _reduce(d * d, reduction)


def dropout(x, p=0.5, training=True, rng=None):
    if not training or p == 0:
        return x
    xp = array_module(x.data)
    rng = rng if rng is not None else (init.generator() if xp is np else xp.random)
    keep = rng.random(x.shape) >= p
    return x * (keep.astype(x.dtype) / (1 - p))
