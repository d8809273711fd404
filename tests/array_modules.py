"""The array modules the trainer's tests run on, by name: "numpy"; "strict" (strict_xp.py, NumPy
that refuses to become NumPy unasked, so a NumPy-only path fails here as it would on a GPU); and
"cupy", where CuPy imports and a GPU computes, otherwise the test is skipped with the reason.
The test scripts import this too (from the folder above them)."""
import numpy as np

from dpcore.devices import device_module

NAMES = ("numpy", "strict", "cupy")


def cupy_unusable():
    """None where CuPy imports and has a usable GPU here; otherwise why not, in one line."""
    try:
        device_module("cuda")
    except RuntimeError as e:
        return str(e)
    return None


def module(name, local_rank=0):
    """The module called `name`; for cupy, GPU local_rank (mod the GPU count) is made current."""
    if name == "numpy":
        return np
    if name == "strict":
        import strict_xp
        return strict_xp
    if name == "cupy":
        return device_module("cuda", local_rank)
    raise ValueError(f"no array module {name!r}; expected one of {NAMES}")


def module_or_skip(name):
    """module(name) in a test; a cupy that cannot run here skips the test, saying why."""
    if name == "cupy":
        why = cupy_unusable()
        if why is not None:
            import pytest  # here: the scripts that import this module run without it
            pytest.skip(why)
    return module(name)


def host(a):
    """A NumPy copy of any array (a device array by .get(), which CuPy and strict_xp offer)."""
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)
