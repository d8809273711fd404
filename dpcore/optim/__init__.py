"""Optimizers with PyTorch's update rules. Every update is elementwise and in place, so the same
code updates one parameter, a whole flat buffer, or one rank's shard of it."""
from .adamw import AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["AdamW", "Optimizer", "SGD"]
