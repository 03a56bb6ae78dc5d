"""Layers built with inplace=True on a view of a tensor in a graph (EfficientNet's classifier: torch.flatten, then
Dropout(inplace=True)): they compute out of place there (gpumemnet cannot rebase the viewed tensor's graph), so the
network's outputs and gradients are PyTorch's; an explicit x.relu_() on such a view raises while the viewed tensor
lives, and is recorded once the view is the last tensor on its memory."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import nn

LAYERS = ["ReLU", "ReLU6", "SiLU", "Hardswish", "Hardsigmoid", "Mish", "ELU", "LeakyReLU"]


@pytest.mark.parametrize("name", LAYERS)
def test_inplace_layer_on_a_graph_view_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((4, 6, 1, 1)).astype(np.float32)
    results = []
    for lib in (gm, torch):
        x = lib.tensor(a, requires_grad=True)
        h = (x * 2.0).flatten(1)          # a view of a tensor in the graph
        y = getattr(lib.nn, name)(inplace=True)(h)
        (y * y).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy()))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_inplace_dropout_on_a_graph_view_trains():
    gm.manual_seed(0)
    x = gm.randn(8, 16, 1, 1, requires_grad=True)
    y = nn.Dropout(0.5, inplace=True)((x * 1.0).flatten(1))
    y.sum().backward()
    kept = (y.detach().numpy() != 0)
    np.testing.assert_array_equal(x.grad.numpy().reshape(8, 16) != 0, kept)  # gradient only where kept
    np.testing.assert_allclose(x.grad.numpy().reshape(8, 16)[kept], 2.0)  # scaled by 1 / (1 - p)


def test_explicit_inplace_method_on_a_graph_view_reaches_its_base():
    """h.flatten(1).relu_() while h lives: the write is recorded on h (indexing.write_graph_view), as PyTorch's
    CopySlices records it: h sees the values and its graph the relu."""
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(2).standard_normal((2, 3, 1, 1))
    results = []
    for L in (gm, torch):
        x = L.tensor(a, requires_grad=True)
        h = x * 2.0
        h.flatten(1).relu_()
        (h * L.arange(6.0, dtype=L.float64).view(2, 3, 1, 1)).sum().backward()
        results.append((h.detach().numpy(), x.grad.numpy()))
    for g, t in zip(*results):
        np.testing.assert_allclose(g, t, rtol=1e-14)


def test_inplace_writes_on_the_last_tensor_of_its_memory_match_pytorch():
    """A view whose base is gone (timm's GhostNet: `x = cat(...)[:, :n]`, then `x += shortcut`): nothing else sees
    the memory, so the writes are recorded as on any tensor in a graph, including those whose gradient needs the
    old value (y *= s, y /= s with s in the graph: computed from a clone, as PyTorch keeps the original)."""
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(1).standard_normal((2, 4, 3))
    results = []
    for L in (gm, torch):
        x = L.tensor(a, requires_grad=True)
        s = L.tensor(np.full((2, 2, 3), 1.5), requires_grad=True)
        y = L.cat([x * 2, x * 3], 1)[:, :2]
        y += s
        y *= s
        y /= s + 1
        y.relu_()
        (y * y).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), s.grad.numpy()))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_inplace_layer_still_writes_in_place_where_it_can():
    x = gm.randn(2, 3, requires_grad=True)
    h = x * 2.0
    assert nn.ReLU(inplace=True)(h) is h
