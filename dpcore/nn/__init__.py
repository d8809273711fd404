"""Layers, PyTorch-shaped: same names, shapes, default initialisation and state_dict keys."""
from . import functional, init
from .init import manual_seed
from .layers import GELU, Dropout, Embedding, LayerNorm, Linear, ReLU, Tanh
from .module import Module, Parameter, Sequential

__all__ = ["Dropout", "Embedding", "GELU", "LayerNorm", "Linear", "Module", "Parameter", "ReLU",
           "Sequential", "Tanh", "functional", "init", "manual_seed"]
