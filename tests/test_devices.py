"""Where the trainer's arrays live (dpcore/devices.py): each array's own module, moves between
modules made on purpose, model.to(...) as in PyTorch, and "cuda" without CuPy or a GPU refused
in one line. Also what strict_xp, the tests' stand-in for CuPy, promises to refuse."""
import numpy as np
import pytest

import dpcore.nn as nn
from array_modules import cupy_unusable, host
from dpcore.devices import array_module, device_module, to_module
from dpcore.parallel import FlatParams
from dpcore.parallel.ledger import held_bytes


def test_each_array_names_its_own_module(xp):
    a = xp.arange(6.0)
    assert array_module(a) is xp and array_module(a[2:].reshape(2, 2)) is xp
    assert array_module(np.float32(1)) is np and array_module([1, 2]) is np


def test_moves_between_modules_are_made_on_purpose(xp):
    a = xp.arange(4.0)
    assert to_module(a, xp) is a  # already there: no copy
    back = to_module(a, np)
    assert type(back) is np.ndarray and back.tolist() == [0, 1, 2, 3]
    there = to_module(back, xp)
    assert array_module(there) is xp and host(there).tolist() == [0, 1, 2, 3]


def test_model_to_a_module_a_device_or_a_dtype(xp):
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.LayerNorm(2))
    start = {k: v.copy() for k, v in model.state_dict().items()}
    assert model.to(xp) is model
    assert all(array_module(p.data) is xp for p in model.parameters())
    model.to("cpu", np.float64)
    assert all(type(p.data) is np.ndarray and p.data.dtype == np.float64
               for p in model.parameters())
    model.to(xp=xp, dtype="float32")  # the keyword form of before
    state = model.state_dict()
    assert all(np.array_equal(host(state[k]), v) for k, v in start.items())


def test_flat_buffers_take_parameters_of_one_module():
    import strict_xp
    a, b = nn.Linear(2, 2), nn.Linear(2, 2).to(strict_xp)
    with pytest.raises(TypeError, match="one array module"):
        FlatParams([*a.parameters(), *b.parameters()])


def test_held_bytes_counts_each_buffer_once_through_its_views(xp):
    flat = FlatParams(nn.Linear(4, 3).to(xp).parameters())
    views = [p.grad for p in flat.params] + [flat.grad[:5], flat.grad]
    assert held_bytes(views) == flat.grad.nbytes == 15 * 4


def test_cuda_without_cupy_or_gpu_is_refused_in_one_line():
    why = cupy_unusable()
    if why is None:
        pytest.skip("CuPy has a usable GPU here")
    for attempt in (lambda: device_module("cuda"), lambda: nn.Linear(2, 2).to("cuda")):
        with pytest.raises(RuntimeError, match="^device 'cuda' ") as e:
            attempt()
        assert "\n" not in str(e.value)
    assert device_module("cpu") is np
    with pytest.raises(ValueError, match="'cpu' or 'cuda'"):
        device_module("gpu")


def test_strict_arrays_refuse_to_become_numpy_unasked():
    import strict_xp as sx
    a = sx.arange(6.0)
    refused = [lambda: np.asarray(a), lambda: np.exp(a), lambda: np.concatenate([a, a]),
               lambda: np.ones(6) + a, lambda: a * np.ones(6), lambda: a.__setitem__(0, np.ones(1)),
               lambda: np.zeros(6).__setitem__(..., a)]
    for conversion in refused:
        with pytest.raises(TypeError):
            conversion()
    assert type(a.sum()) is sx.ndarray and a[1:].base is a and a[1:][1:].base is a
    assert (np.float32(2) * a + 1.0).get().tolist() == [1, 3, 5, 7, 9, 11]
