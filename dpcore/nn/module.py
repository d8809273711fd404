"""Module: a tree of parameters and submodules, named as PyTorch names them ("0.weight")."""
from collections import OrderedDict
from types import ModuleType

import numpy as np

from ..devices import device_module, to_module
from ..tensor import Tensor, array_module


class Parameter(Tensor):
    """A leaf tensor that a Module owns and an optimizer updates."""

    def __init__(self, data):
        super().__init__(data, requires_grad=True)


class Module:
    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        # registration order is parameter order: state_dict keys, flat buffer layout, buckets
        if isinstance(value, Parameter):
            self.__dict__.setdefault("_parameters", OrderedDict())[name] = value
        elif isinstance(value, Module):
            self.__dict__.setdefault("_modules", OrderedDict())[name] = value
        object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # -- the tree -------------------------------------------------------------------------------

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix="", recurse=True):
        """(name, parameter) in registration order; a parameter shared by two modules once.
        recurse=False: this module's own parameters only, as in torch."""
        seen = set()
        for path, module in (self.named_modules(prefix) if recurse else [(prefix, self)]):
            for name, p in module._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{path}.{name}" if path else name), p

    def parameters(self):
        return (p for _, p in self.named_parameters())

    # -- state ----------------------------------------------------------------------------------

    def state_dict(self):
        """name -> a copy of the parameter's array (a copy, so later steps do not change it)."""
        return OrderedDict((name, p.data.copy()) for name, p in self.named_parameters())

    def load_state_dict(self, state, strict=True):
        """Copy arrays (NumPy, CuPy, or anything np.asarray takes, e.g. CPU torch tensors) into
        the parameters in place, moved to where the parameters are: parameters may be views
        into a flat buffer."""
        own = dict(self.named_parameters())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing {missing}, unexpected {unexpected}")
        for name, p in own.items():
            if name in state:
                value = state[name]
                if isinstance(value, Tensor):
                    value = value.data
                elif hasattr(value, "detach"):  # a torch.Tensor
                    value = value.detach().cpu().numpy()
                value = to_module(value, array_module(p.data))
                if value.shape != p.data.shape:
                    raise ValueError(f"load_state_dict: {name} has shape {value.shape}, "
                                     f"expected {p.data.shape}")
                p.data[...] = value
        return missing, unexpected

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad[...] = 0

    def train(self, mode=True):
        for _, m in self.named_modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def to(self, *targets, dtype=None, xp=None):
        """Convert every parameter, as PyTorch's Module.to: each target is a device ("cpu",
        "cuda"), an array module (numpy, cupy) or a dtype (numpy.float64 for gradient checks):
        model.to("cuda"), model.to(cupy, numpy.float32). Do this before DataParallel, which
        builds its buffers with the parameters' module."""
        for target in targets:
            if isinstance(target, ModuleType):
                xp = target
            elif isinstance(target, str) and target in ("cpu", "cuda"):
                xp = device_module(target)
            else:
                dtype = np.dtype(target)
        for p in self.parameters():
            data = p.data if xp is None else to_module(p.data, xp)
            p.data = data if dtype is None else data.astype(dtype)
            p.grad = None
        return self

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"  ({name}): " + repr(m).replace("\n", "\n  ")
                 for name, m in self._modules.items()]
        body = "\n" + "\n".join(lines) + "\n" if lines else ""
        return f"{type(self).__name__}({self.extra_repr()}{body})"


class Sequential(Module):
    def __init__(self, *layers):
        super().__init__()
        for i, layer in enumerate(layers):
            setattr(self, str(i), layer)

    def forward(self, x):
        for layer in self._modules.values():
            x = layer(x)
        return x

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())
