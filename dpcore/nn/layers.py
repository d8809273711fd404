"""The layers, with PyTorch's parameter names, shapes and default initialisation."""
import math

import numpy as np

from . import functional as F
from . import init
from .module import Module, Parameter


class Linear(Module):
    """y = x @ weight.T + bias, weight (out, in) as in PyTorch."""

    def __init__(self, in_features, out_features, bias=True, dtype=np.float32):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / math.sqrt(in_features) if in_features else 0.0
        self.weight = Parameter(init.uniform((out_features, in_features), bound, dtype))
        self.bias = Parameter(init.uniform((out_features,), bound, dtype)) if bias else None

    def forward(self, x):
        y = x @ self.weight.T
        return y + self.bias if self.bias is not None else y

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"


class Embedding(Module):
    """Rows of weight (num_embeddings, embedding_dim) picked by integer ids; N(0, 1) init."""

    def __init__(self, num_embeddings, embedding_dim, dtype=np.float32):
        super().__init__()
        self.weight = Parameter(init.normal((num_embeddings, embedding_dim), dtype))

    def forward(self, ids):
        return self.weight[ids]


class LayerNorm(Module):
    """Normalise over the last len(normalized_shape) axes (biased variance, as PyTorch)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, dtype=np.float32):
        super().__init__()
        shape = normalized_shape
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.axes, self.eps = tuple(range(-len(shape), 0)), eps
        if elementwise_affine:
            self.weight = Parameter(np.ones(shape, dtype))
            self.bias = Parameter(np.zeros(shape, dtype))
        else:
            self.weight = self.bias = None

    def forward(self, x):
        d = x - x.mean(axis=self.axes, keepdims=True)
        y = d * ((d * d).mean(axis=self.axes, keepdims=True) + self.eps) ** -0.5
        return y * self.weight + self.bias if self.weight is not None else y


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return x.gelu(self.approximate)


class Tanh(Module):
    def forward(self, x):
        return x.tanh()
