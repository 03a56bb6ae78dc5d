"""In-place add_/sub_/mul_/div_ by a constant (or a tensor needing no gradient) on a non-leaf in a graph: recorded
with the right backward, and PyTorch's version check still catches a node that saved the overwritten value."""
import numpy as np
import pytest

import gpumemnet as gm
from gradcheck import gradcheck, to_numpy


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def scaled(x):
    y = x * 1.0
    y.mul_(3.0)
    y.div_(4.0)
    y.add_(2.0)
    y.sub_(0.5)
    y *= -2
    y /= 0.25
    return y * x  # the gradient of x also flows through y's in-place chain


def test_inplace_by_constants_gradcheck_and_torch():
    torch = pytest.importorskip("torch")
    a = rnd(3, 4)
    gradcheck(scaled, [gm.tensor(a, requires_grad=True)])
    g = gm.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    scaled(g).sum().backward()
    scaled(t).sum().backward()
    np.testing.assert_allclose(to_numpy(g.grad), t.grad.numpy(), rtol=1e-12)


def test_inplace_by_a_tensor_without_grad():
    b = gm.tensor(rnd(1, 4, seed=1) + 3)
    gradcheck(lambda x: (x * 1.0).mul_(b), [gm.tensor(rnd(3, 4), requires_grad=True)])
    gradcheck(lambda x: (x * 1.0).div_(b), [gm.tensor(rnd(3, 4), requires_grad=True)])


def test_version_check_still_raises_for_a_saved_value():
    x = gm.tensor(rnd(3), requires_grad=True)
    y = x.exp()  # Exp saves its output
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()
    x = gm.tensor(rnd(3), requires_grad=True)
    y = x * 1.0
    z = y * y  # Mul saves y
    y.div_(2.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.sum().backward()


def test_where_the_old_value_is_needed_it_is_kept_and_leaves_are_refused():
    """y.mul_(w) with w in the graph: w's gradient needs y's old value, computed from a clone of it (PyTorch keeps
    the original self likewise); a leaf that requires grad is still refused."""
    torch = pytest.importorskip("torch")
    grads = []
    for L in (gm, torch):
        x = L.tensor(rnd(3), requires_grad=True)
        w = L.tensor(rnd(3, seed=2), requires_grad=True)
        y = x * 1.5
        y.mul_(w).div_(w + 3)
        y.sum().backward()
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    x = gm.tensor(rnd(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf tensor that requires grad cannot be modified in place"):
        x.mul_(2.0)


def test_masked_fill_in_place_in_a_graph():
    torch = pytest.importorskip("torch")
    a, m = rnd(3, 4), rnd(3, 4, seed=5) > 0

    def fn(mod, x, mask):
        y = x * 2
        y.masked_fill_(mask, -1.0)
        return y * x

    g = gm.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    fn(gm, g, gm.tensor(m)).sum().backward()
    fn(torch, t, torch.tensor(m)).sum().backward()
    np.testing.assert_allclose(to_numpy(g.grad), t.grad.numpy(), rtol=1e-12)
    gradcheck(lambda x: fn(gm, x, gm.tensor(m)), [gm.tensor(a, requires_grad=True)])
    x = gm.tensor(a, requires_grad=True)
    y = x.exp()
    y.masked_fill_(gm.tensor(m), 0.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()
