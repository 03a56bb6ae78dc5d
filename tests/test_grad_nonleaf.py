"""autograd.grad and backward(inputs=...) run only the nodes between the outputs and the inputs, as PyTorch's
engine does (its exec_info): a node below a non-leaf input is never run, a leaf below it sees no gradient and its
hooks do not fire. Running them did more than waste time: under create_graph a node with no graph formula below
the input (a conv weight gradient of an earlier MAML step) raised."""
import numpy as np
import pytest

import gpumemnet as gm


def _loud(lib, ran):
    class Loud(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            ran.append(1)
            return g * 2
    return Loud


def test_grad_stops_at_a_non_leaf_input():
    ran = []
    a = gm.ones(3, requires_grad=True)
    b = _loud(gm, ran).apply(a)
    g, = gm.autograd.grad((b * b).sum(), b)
    np.testing.assert_array_equal(g.numpy(), [4.0, 4.0, 4.0])
    assert ran == []  # the node below b made nothing that is returned
    g, = gm.autograd.grad((b * b).sum(), a)
    assert ran == [1]
    np.testing.assert_array_equal(g.numpy(), [8.0, 8.0, 8.0])


def test_backward_inputs_leaves_the_leaves_below_alone():
    hits = []
    a = gm.ones(3, requires_grad=True)
    a.register_hook(lambda g: hits.append(g))
    c = a.exp() * 2
    (c * c).sum().backward(inputs=[c])
    assert hits == [] and a.grad is None
    np.testing.assert_allclose(c.grad.numpy(), 4 * np.e * np.ones(3), rtol=1e-6)


def test_grad_of_two_inputs_one_below_the_other():
    a = gm.tensor([0.5, -1.0], requires_grad=True)
    b = a.tanh()
    y = (b * a).sum()
    ga, gb = gm.autograd.grad(y, [a, b])
    t = np.tanh([0.5, -1.0])
    np.testing.assert_allclose(gb.numpy(), [0.5, -1.0], rtol=1e-6)
    np.testing.assert_allclose(ga.numpy(), t + np.array([0.5, -1.0]) * (1 - t * t), rtol=1e-6)


def _maml_conv(lib, x, w0, steps=3, lr=0.1):
    F = lib.nn.functional
    w = lib.tensor(w0, requires_grad=True)
    fast = w
    for _ in range(steps):  # each inner step differentiates with respect to the previous step's (non-leaf) weight
        g, = lib.autograd.grad(F.conv2d(x, fast, padding=1).pow(2).sum(), fast, create_graph=True)
        fast = fast - lr * g
    F.conv2d(x, fast, padding=1).pow(2).sum().backward()
    return w.grad


def test_multi_step_maml_through_conv_matches_pytorch():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(0)
    x, w0 = r.standard_normal((2, 1, 5, 5)), r.standard_normal((3, 1, 3, 3)) * 0.1
    ours = _maml_conv(gm, gm.tensor(x), w0)
    ref = _maml_conv(torch, torch.tensor(x), w0)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-9, atol=1e-12)
