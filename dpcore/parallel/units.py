"""Units at ZeRO stage 3: the parameters one module owns itself, gathered together.

A unit is a run of consecutive parameters (a Linear's weight and bias), hence a span of the flat
buffers; units are listed last module first, backward's order, and each is also one gradient
bucket, so bucket_cap_mb plays no part at stage 3. A module's forward gathers the units it needs
first and releases them after; its output is marked so that backward gathers them again before
it enters the module (sharded_params.py says when and how).

The wrapped forward is an instance attribute, so build one engine per model.
"""
from ..tensor import Tensor


def make_units(module, flat):
    """One unit (parameter indices) per module that owns parameters, last module first."""
    owner = _owners(module)
    units = []
    for i, p in enumerate(flat.params):
        if units and owner[id(p)] is owner[id(flat.params[units[-1][0]])]:
            units[-1].insert(0, i)
        else:
            units.append([i])
    return units[::-1]


def _owners(model):
    """parameter id -> the module it is registered in first (parameter order's owner)."""
    owner = {}
    for _, module in model.named_modules():
        for _, p in module.named_parameters(recurse=False):
            owner.setdefault(id(p), module)
    return owner


def module_units(model, flat, units):
    """(module, the units its forward needs) for every module that holds a flat parameter: a
    tied parameter makes a unit that two modules need."""
    unit_of = {id(flat.params[i]): u for u, unit in enumerate(units) for i in unit}
    for _, module in model.named_modules():
        needed = sorted({unit_of[id(p)] for _, p in module.named_parameters(recurse=False)
                         if id(p) in unit_of})
        if needed:
            yield module, needed


def wrap_forward(store, module, units):
    """module.forward gathers its units first, releases them after, and marks its output so
    that backward gathers them again before it enters the module."""
    forward = module.forward

    def gathered_forward(*args, **kwargs):
        store.gather_for_forward(units)
        try:
            out = forward(*args, **kwargs)
        finally:
            store.after_module_forward(units)
        return _before_backward(out, lambda: store.gather_for_backward(units))

    object.__setattr__(module, "forward", gathered_forward)  # an instance attribute: not a layer


def _before_backward(out, gather):
    """out, through an identity node whose backward calls gather() first."""
    if isinstance(out, (tuple, list)):
        return type(out)(_before_backward(o, gather) for o in out)
    return out.before_backward(gather) if isinstance(out, Tensor) else out
