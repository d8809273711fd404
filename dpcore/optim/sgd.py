"""SGD with momentum and weight decay, torch.optim.SGD's rule:
g = grad + wd * p;  buf = g (first step) else momentum * buf + (1 - dampening) * g;
g = g + momentum * buf (nesterov) else buf;  p -= lr * g."""
from .optimizer import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov)

    def update(self, p, grad, state):
        g = grad + self.weight_decay * p if self.weight_decay else grad
        if self.momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.copy()
            else:
                buf *= self.momentum
                buf += (1 - self.dampening) * g
            g = g + self.momentum * buf if self.nesterov else buf
        p -= self.lr * g
