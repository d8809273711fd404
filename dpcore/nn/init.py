"""Initialisation: one generator for all layers, so `manual_seed(s)` makes a model reproducible
(data parallelism then broadcasts rank 0's parameters anyway)."""
import numpy as np

_rng = np.random.default_rng()


def manual_seed(seed):
    global _rng
    _rng = np.random.default_rng(seed)


def generator():
    return _rng


def uniform(shape, bound, dtype):
    """U(-bound, bound): PyTorch's Linear init, kaiming_uniform(a=sqrt(5)), comes to
    bound = 1/sqrt(fan_in) for the weight and the bias alike."""
    return _rng.uniform(-bound, bound, size=shape).astype(dtype)


def normal(shape, dtype):
    return _rng.standard_normal(size=shape).astype(dtype)
