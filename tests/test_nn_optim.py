"""Layers, losses, optimizers and flat buffers; against PyTorch where it is installed. Tests that
take `xp` run on each array module (numpy, strict_xp, cupy where a GPU is usable)."""
import numpy as np
import pytest

import dpcore.nn as nn
import dpcore.nn.functional as F
import dpcore.optim as optim
from array_modules import host
from dpcore.parallel import FlatParams
from dpcore.tensor import Tensor
from test_autograd import check_grad

rng = np.random.default_rng(1)


def mlp(dtype=np.float64, seed=0):
    nn.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16, dtype=dtype), nn.GELU(), nn.LayerNorm(16, dtype=dtype),
                         nn.Linear(16, 16, dtype=dtype), nn.ReLU(), nn.Linear(16, 4, dtype=dtype))


# -- modules ------------------------------------------------------------------------------------

def test_linear_shape_and_pytorch_default_init():
    # Seeded: the 30 bias values reach 0.9 of their bound only 96 % of the time by chance.
    nn.manual_seed(0)
    layer = nn.Linear(400, 30)
    assert layer.weight.shape == (30, 400) and layer.bias.shape == (30,)
    assert layer.weight.dtype == np.float32
    bound = 1 / np.sqrt(400)
    for p in (layer.weight.data, layer.bias.data):
        assert np.abs(p).max() <= bound and np.abs(p).max() > 0.9 * bound
    assert nn.Linear(3, 2, bias=False).bias is None


def test_state_dict_names_copies_and_in_place_load(xp):
    model = mlp().to(xp=xp)
    names = ["0.weight", "0.bias", "2.weight", "2.bias", "3.weight", "3.bias", "5.weight", "5.bias"]
    assert list(model.state_dict()) == names
    assert [n for n, _ in model.named_parameters()] == names
    state = model.state_dict()
    weight = model[0].weight.data
    assert type(state["0.weight"]) is type(weight)  # where the model is
    state["0.weight"] += 1
    assert not np.array_equal(host(weight), host(state["0.weight"]))  # a copy
    model.load_state_dict(state)
    assert model[0].weight.data is weight  # loaded in place: flat buffer views survive
    np.testing.assert_array_equal(host(weight), host(state["0.weight"]))
    with pytest.raises(KeyError):
        model.load_state_dict({"0.weight": state["0.weight"]})
    with pytest.raises(ValueError):
        model.load_state_dict({**state, "0.bias": xp.zeros(3)})
    host_state = {k: host(v) for k, v in state.items()}  # a checkpoint read on the host
    host_state["0.bias"][:] = 3
    model.load_state_dict(host_state)
    np.testing.assert_array_equal(host(model[0].bias.data), 3)
    on_host = mlp(seed=1).load_state_dict(model.state_dict())  # and the other way: .get()
    assert on_host == ([], [])


def test_train_eval_zero_grad_and_dropout(xp):
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)).to(xp=xp)
    x = Tensor(xp.ones((200, 3), np.float32))
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    assert not model.eval()[1].training
    np.testing.assert_array_equal(host(model[1](x).data), host(x.data))  # identity in eval
    y = host(model.train()[1](x).data)
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.3 < (y == 0).mean() < 0.7


# -- layers and losses: finite differences ------------------------------------------------------

def test_layernorm_and_embedding_gradients(xp):
    ln = nn.LayerNorm(5, dtype=np.float64).to(xp=xp)
    ln.weight.data[...] = xp.asarray(rng.standard_normal(5))
    check_grad(lambda x: ln(x), (3, 5), xp=xp)
    x = xp.asarray(rng.standard_normal((2, 5)))
    check_grad(lambda w, b: nn.LayerNorm(5, dtype=np.float64).to(xp=xp)(Tensor(x)) * w + b,
               (5,), (5,), xp=xp)
    ids = xp.asarray([[0, 2], [2, 3]])
    check_grad(lambda w: w[ids], (4, 3), xp=xp)


def test_loss_gradients(xp):
    target = xp.asarray([0, 2, 1, 2])
    check_grad(lambda z: F.cross_entropy(z, target), (4, 3), xp=xp)
    check_grad(lambda z: F.cross_entropy(z, target, reduction="sum"), (4, 3), xp=xp)
    check_grad(lambda z: F.log_softmax(z), (4, 3), xp=xp)
    check_grad(lambda z: F.softmax(z, dim=0), (4, 3), xp=xp)
    y = xp.asarray(rng.standard_normal((4, 3)))
    check_grad(lambda z: F.mse_loss(z, y), (4, 3), xp=xp)


def test_log_softmax_is_stable(xp):
    z = Tensor(xp.asarray([[1000.0, 0.0, -1000.0]]), requires_grad=True)
    out = F.log_softmax(z)
    np.testing.assert_allclose(host(out.data), [[0.0, -1000.0, -2000.0]])
    F.cross_entropy(z, xp.asarray([1])).backward()
    assert np.isfinite(host(z.grad)).all()


# -- optimizers and flat buffers ----------------------------------------------------------------

def test_optimizer_on_flat_buffer_equals_per_parameter(xp):
    a, b = mlp(np.float32, seed=3).to(xp=xp), mlp(np.float32, seed=3).to(xp=xp)
    flat = FlatParams(b.parameters())
    assert type(flat.data) is type(a[0].weight.data)  # allocated with the parameters' module
    assert a[0].weight.data.base is None and b[0].weight.data.base is not None
    opt_a = optim.AdamW(a.parameters(), lr=0.01)
    opt_b = optim.AdamW([flat.as_tensor()], lr=0.01)
    x = Tensor(xp.asarray(rng.standard_normal((8, 6)).astype(np.float32)))
    y = xp.asarray(rng.integers(0, 4, 8))
    for _ in range(3):
        for model, opt in ((a, opt_a), (b, opt_b)):
            model.zero_grad() if opt is opt_a else flat.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        # bitwise: elementwise
        np.testing.assert_array_equal(host(pa.data), host(pb.data), err_msg=name)
    assert flat.count == 484 and flat.shard(0, 3) == (0, 162) and flat.shard(2, 3) == (323, 484)


def test_flat_views_and_adopted_gradient(xp):
    model = mlp().to(xp=xp)
    flat = FlatParams(model.parameters())
    flat.data[:] = 7
    assert (model[0].weight.data == 7).all()
    model.zero_grad()  # set_to_none breaks the view ...
    model[0].bias.grad = xp.ones(16)
    flat.adopt_grad(1)  # ... and adopt_grad puts it back
    assert model[0].bias.grad.base is not None and flat.grad[flat.range(1)[0]] == 1


# -- against PyTorch ----------------------------------------------------------------------------

def torch_twin(model):
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    twin = tnn.Sequential(tnn.Linear(6, 16), tnn.GELU(), tnn.LayerNorm(16), tnn.Linear(16, 16),
                          tnn.ReLU(), tnn.Linear(16, 4)).double()
    twin.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()})
    return torch, twin


@pytest.mark.torch
def test_mlp_forward_backward_matches_pytorch(xp):
    model = mlp()
    torch, twin = torch_twin(model)
    model.to(xp=xp)
    x, y = rng.standard_normal((10, 6)), rng.integers(0, 4, 10)
    loss = F.cross_entropy(model(Tensor(xp.asarray(x))), xp.asarray(y))
    loss.backward()
    tloss = torch.nn.functional.cross_entropy(twin(torch.from_numpy(x)), torch.from_numpy(y))
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
    for (name, p), tp in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(host(p.grad), tp.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)


@pytest.mark.torch
@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.1)),
    ("AdamW", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)),
])
def test_five_optimizer_steps_match_pytorch(name, kwargs):
    model = mlp()
    torch, twin = torch_twin(model)
    opt = getattr(optim, name)(model.parameters(), **kwargs)
    topt = getattr(torch.optim, name)(twin.parameters(), **kwargs)
    x, y = rng.standard_normal((10, 6)), rng.integers(0, 4, 10)
    for _ in range(5):
        opt.zero_grad()
        F.cross_entropy(model(Tensor(x)), y).backward()
        opt.step()
        topt.zero_grad()
        torch.nn.functional.cross_entropy(twin(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        topt.step()
    for (n, p), tp in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=n)


@pytest.mark.torch
def test_embedding_and_float32_mse_match_pytorch():
    torch = pytest.importorskip("torch")
    emb = nn.Embedding(5, 3)
    temb = torch.nn.Embedding(5, 3)
    temb.load_state_dict({k: torch.from_numpy(v) for k, v in emb.state_dict().items()})
    ids = np.array([[1, 4, 1], [0, 1, 2]])
    target = rng.standard_normal((2, 3, 3)).astype(np.float32)
    F.mse_loss(emb(ids), target).backward()
    torch.nn.functional.mse_loss(temb(torch.from_numpy(ids)), torch.from_numpy(target)).backward()
    np.testing.assert_allclose(emb.weight.grad, temb.weight.grad.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.torch
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_pytorch(approximate):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal(50) * 3
    t = torch.from_numpy(x).requires_grad_()
    ours = Tensor(x, requires_grad=True)
    y = nn.GELU(approximate)(ours)
    y.sum().backward()
    ty = torch.nn.GELU(approximate)(t)
    ty.sum().backward()
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ours.grad, t.grad.numpy(), rtol=1e-12, atol=1e-13)
