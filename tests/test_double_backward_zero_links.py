"""A parameter reached by a gradient penalty only through a mask (the bias ahead of a LeakyReLU, the input of a max
pool) gets a zero gradient, not None, as in PyTorch, whose backward formulas take that input as an argument with a
zero derivative. It matters to a penalty backpropagated alone (StyleGAN2's lazy R1 step): Adam skips a parameter
whose .grad is None, and moves one whose .grad is zeros by its momentum."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

R = np.random.RandomState(5)
IMG = R.randn(2, 2, 6, 6)
BIAS = R.randn(2, 1, 1) * 0.3
TARGET = R.randint(0, 2, (2, 6, 6))


def _F(lib):
    return lib.nn.functional


# name -> op(lib, t) on an (N, C, H, W) tensor
OPS = {
    "relu": lambda L, t: L.relu(t),
    "relu in place": lambda L, t: _F(L).relu(t * 1.0, inplace=True),
    "leaky_relu": lambda L, t: _F(L).leaky_relu(t, 0.2),
    "hardtanh / relu6": lambda L, t: _F(L).hardtanh(t) + _F(L).relu6(t * 3),
    "abs": lambda L, t: t.abs(),
    "clamp (no edge in PyTorch)": lambda L, t: t.clamp(-0.5, 0.5),
    "max_pool2d": lambda L, t: _F(L).max_pool2d(t, 2),
    "adaptive_max_pool2d": lambda L, t: _F(L).adaptive_max_pool2d(t, 3),
    "avg_pool2d": lambda L, t: _F(L).avg_pool2d(t, 2),
    "adaptive_avg_pool2d 2x2 and 1x1 (a mean)": lambda L, t: _F(L).adaptive_avg_pool2d(t, 2).sum((2, 3))
    + _F(L).adaptive_avg_pool2d(t, 1)[..., 0, 0],
    "reflect and replicate pads": lambda L, t: _F(L).pad(t, (1, 1, 1, 1), mode="reflect")[..., :6, :6]
    + _F(L).pad(t, (1, 0, 1, 0), mode="replicate")[..., 1:, 1:],
    "nll_loss per pixel": lambda L, t: _F(L).nll_loss(t, L.tensor(TARGET), reduction="none"),
    "constant pad (no edge in PyTorch)": lambda L, t: _F(L).pad(t, (1, 1, 1, 1))[..., 1:-1, 1:-1],
}


def _penalty_grads(lib, op):
    """A penalty on d op(w x + b) / dx alone, backpropagated: the .grad of w and of b (b reaches it only through
    op's mask: None in PyTorch where op's formula has no edge to its input, zeros where it has)."""
    x = lib.tensor(IMG, dtype=lib.float64, requires_grad=True)
    w = lib.tensor(1.5, dtype=lib.float64, requires_grad=True)
    b = lib.tensor(BIAS, dtype=lib.float64, requires_grad=True)
    y = op(lib, x * w + b)
    g, = lib.autograd.grad((y * y.detach()).sum(), x, create_graph=True)
    (g ** 2).sum().backward()
    return [None if t.grad is None else t.grad.detach().numpy() for t in (w, b)]


@pytest.mark.parametrize("name", list(OPS))
def test_mask_input_gets_pytorchs_gradient(name):
    ours, theirs = _penalty_grads(gm, OPS[name]), _penalty_grads(torch, OPS[name])
    for which, a, b in zip(("w", "b"), ours, theirs):
        assert (a is None) == (b is None), f"{which}.grad: ours {a}, PyTorch's {b}"
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=which)


def _lazy_r1(lib):
    """StyleGAN2's regularisation step, as its training loops write it: the discriminator's optimizer takes a step
    on the R1 penalty alone; the conv's bias reaches that penalty only through the LeakyReLU's mask."""
    d = lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3), lib.nn.LeakyReLU(0.2), lib.nn.Flatten(), lib.nn.Linear(48, 1))
    d = d.double()
    rng = np.random.RandomState(0)
    with lib.no_grad():
        for p in d.parameters():
            p.copy_(lib.tensor(rng.randn(*p.shape) * 0.3))
    opt = lib.optim.Adam(d.parameters(), lr=0.01)
    real = lib.tensor(IMG, requires_grad=True)
    for _ in range(3):
        opt.zero_grad()
        out, = lib.autograd.grad(d(real).sum(), real, create_graph=True)
        (out.pow(2).reshape(2, -1).sum(1).mean() * 5).backward()
        opt.step()
    return [p.detach().numpy() for p in d.parameters()]


def test_lazy_r1_step_moves_every_parameter_as_pytorch():
    for a, b in zip(_lazy_r1(gm), _lazy_r1(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
