"""Every Tensor op's gradient against central finite differences, in float64; the ops also on the
other array modules (the `xp` fixture: strict_xp, and cupy where a GPU is usable)."""
import numpy as np
import pytest

from array_modules import host
from dpcore.tensor import Tensor, no_grad

rng = np.random.default_rng(0)


def check_grad(f, *shapes, positive=False, tol=1e-6, xp=np):
    """f(*tensors) -> Tensor. Compares the gradient of sum(f * R), R a fixed random weight (so
    every output element counts differently), with central differences. The tensors hold arrays
    of module xp; the differences are taken on the host."""
    arrays = [np.array(rng.standard_normal(s)) for s in shapes]
    if positive:
        arrays = [np.array(np.abs(a) + 0.5) for a in arrays]
    out_shape = f(*[Tensor(xp.asarray(a)) for a in arrays]).shape
    weight = xp.asarray(rng.standard_normal(out_shape))

    def loss(*arrs):
        return float((f(*[Tensor(xp.asarray(a)) for a in arrs]).data * weight).sum())

    tensors = [Tensor(xp.asarray(a), requires_grad=True) for a in arrays]
    (f(*tensors) * weight).sum().backward()
    eps = 1e-6
    for a, t in zip(arrays, tensors):
        numeric = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            old = a[idx]
            a[idx] = old + eps
            up = loss(*arrays)
            a[idx] = old - eps
            down = loss(*arrays)
            a[idx] = old
            numeric[idx] = (up - down) / (2 * eps)
        assert t.grad.shape == a.shape
        assert type(t.grad) is type(t.data), "the gradient lives where the data does"
        np.testing.assert_allclose(host(t.grad), numeric, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)),
                                    ((3, 4), ())])
def test_binary_broadcasting(op, shapes, xp):
    fns = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "div": lambda a, b: a / b}
    check_grad(fns[op], *shapes, positive=(op == "div"), xp=xp)


def test_scalar_and_reflected_operands(xp):
    check_grad(lambda a: 2.0 - a * 3 + 1 / a - (a / 4.0) + (-a), (3, 2), positive=True, xp=xp)
    check_grad(lambda a: xp.full((3, 2), 2.0) * a + xp.ones(2) - a, (3, 2), xp=xp)


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)),
                                    ((3, 4), (4,)), ((2, 3, 4), (2, 4, 5))])
def test_matmul(shapes, xp):
    check_grad(lambda a, b: a @ b, *shapes, xp=xp)


def test_rmatmul_with_array(xp):
    w = xp.asarray(rng.standard_normal((4, 2)))
    check_grad(lambda a: w.T @ a, (4, 3), xp=xp)


def test_pow(xp):
    check_grad(lambda a: a ** 3 + a ** 0.5 + a ** -1, (3, 3), positive=True, xp=xp)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 2), False),
                                           (-1, False)])
def test_sum_mean(axis, keepdims, xp):
    check_grad(lambda a: a.sum(axis=axis, keepdims=keepdims), (2, 3, 4), xp=xp)
    check_grad(lambda a: a.mean(axis=axis, keepdims=keepdims), (2, 3, 4), xp=xp)


def test_reshape_transpose(xp):
    check_grad(lambda a: a.reshape(6, 4), (2, 3, 4), xp=xp)
    check_grad(lambda a: a.reshape((4, -1)) * 2, (2, 3, 4), xp=xp)
    check_grad(lambda a: a.T, (3, 5), xp=xp)
    check_grad(lambda a: a.transpose(1, 2, 0), (2, 3, 4), xp=xp)
    check_grad(lambda a: a.transpose((-1, 0, 1)), (2, 3, 4), xp=xp)


@pytest.mark.parametrize("index", [(slice(1, 3),), (1,), (np.array([0, 2, 2, 1]),),
                                   (np.array([0, 1, 1]), np.array([3, 0, 0])),
                                   (slice(None), np.array([1, 1]))])
def test_indexing(index, xp):
    index = tuple(xp.asarray(i) if isinstance(i, np.ndarray) else i for i in index)
    check_grad(lambda a: a[index if len(index) > 1 else index[0]], (3, 4), xp=xp)


@pytest.mark.parametrize("fn", ["relu", "tanh", "exp", "gelu", "gelu_tanh"])
def test_unary(fn, xp):
    f = {"relu": lambda a: a.relu(), "tanh": lambda a: a.tanh(), "exp": lambda a: a.exp(),
         "gelu": lambda a: a.gelu(), "gelu_tanh": lambda a: a.gelu("tanh")}[fn]
    check_grad(f, (4, 5), xp=xp)


def test_log(xp):
    check_grad(lambda a: a.log(), (4, 5), positive=True, xp=xp)


def test_reused_input_and_diamond(xp):
    check_grad(lambda a: a * a + (a.exp() * a).sum(axis=0), (3, 4), xp=xp)


def test_gelu_is_exact_erf(xp):
    x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0])
    from math import erf, sqrt
    expected = [v * 0.5 * (1 + erf(v / sqrt(2))) for v in x]
    np.testing.assert_allclose(host(Tensor(xp.asarray(x)).gelu().data), expected, rtol=1e-15,
                               atol=1e-16)


def test_leaf_gradients_accumulate_and_hook_fires_once_per_backward():
    x = Tensor(np.ones(3), requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.copy()))
    for _ in range(2):
        (x * 2 + x * 3).sum().backward()  # two consumers: the hook waits for both
    np.testing.assert_array_equal(x.grad, [10.0, 10.0, 10.0])
    assert [s.tolist() for s in seen] == [[5.0] * 3, [10.0] * 3]


def test_a_layers_gradients_are_ready_before_the_earlier_layers_backward():
    """Data parallelism starts a bucket's all-reduce from these hooks, so the last layer's must
    fire before the earlier layers' backward runs, not when the whole graph is done (nn.Linear
    computes x @ W.T + b: W.T must run right after its matmul)."""
    import dpcore.nn as nn

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU(),
                          nn.Linear(4, 4))
    params = dict(model.named_parameters())
    fired = []  # (name, the first layer's weight gradient exists yet?)
    for name, p in params.items():
        p.register_post_accumulate_grad_hook(
            lambda t, name=name: fired.append((name, params["0.weight"].grad is not None)))
    model(Tensor(rng.standard_normal((3, 4)))).sum().backward()
    names = [name for name, _ in fired]
    assert sorted(names) == sorted(params)
    assert names.index("4.weight") < names.index("2.weight") < names.index("0.weight")
    assert not dict(fired)["4.weight"] and not dict(fired)["2.weight"]


def test_graph_is_freed_after_backward():
    x = Tensor(np.ones(3), requires_grad=True)
    y = (x * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError):
        y.backward()


def test_no_grad_records_nothing():
    x = Tensor(np.ones(3), requires_grad=True)
    with no_grad():
        y = x * 2
    assert not y.requires_grad and y._backward is None
    assert (x * 2).requires_grad


def test_float32_stays_float32(xp):
    x = Tensor(xp.ones((2, 3), np.float32), requires_grad=True)
    y = ((x * 2.0 + 1) / 3.0 - 0.5).gelu().mean()
    y.backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32


def test_input_gradient_is_not_computed():
    x = Tensor(np.ones((2, 3)))              # data: no gradient wanted
    w = Tensor(np.ones((3, 4)), requires_grad=True)
    (x @ w).sum().backward()
    assert x.grad is None and w.grad.shape == (3, 4)
