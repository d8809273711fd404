"""AdamW, torch.optim.AdamW's rule (decoupled weight decay, bias-corrected moments):
p *= 1 - lr * wd;  m += (1 - b1) (g - m);  v = b2 v + (1 - b2) g^2;
p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)."""
import math

from ..tensor import array_module
from .optimizer import Optimizer


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)

    def update(self, p, g, state):
        b1, b2 = self.betas
        if not state:
            xp = array_module(p)
            state.update(step=0, exp_avg=xp.zeros_like(p), exp_avg_sq=xp.zeros_like(p))
        state["step"] += 1
        t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        if self.weight_decay:
            p *= 1 - self.lr * self.weight_decay
        m += (1 - b1) * (g - m)  # PyTorch's lerp_, same rounding
        v *= b2
        v += (1 - b2) * g * g
        denom = array_module(p).sqrt(v) / math.sqrt(1 - b2 ** t) + self.eps
        p -= self.lr / (1 - b1 ** t) * (m / denom)
