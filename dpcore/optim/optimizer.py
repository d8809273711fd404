"""Optimizer: a list of tensors (each with .data and .grad arrays) and per-tensor state."""


class Optimizer:
    def __init__(self, params, **hyper):
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        self.state = [{} for _ in self.params]
        for name, value in hyper.items():  # lr etc. as attributes, so a schedule can set them
            setattr(self, name, value)

    def step(self):
        for p, state in zip(self.params, self.state):
            if p.grad is not None:  # like PyTorch: a parameter without a gradient stays put
                self.update(p.data, p.grad, state)

    def update(self, param, grad, state):
        """Change the array `param` in place (it may be a view into a flat buffer)."""
        raise NotImplementedError

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad[...] = 0

    def memory(self):
        """Bytes of optimizer state held (momentum, Adam moments)."""
        return sum(a.nbytes for state in self.state for a in state.values() if hasattr(a, "nbytes"))
