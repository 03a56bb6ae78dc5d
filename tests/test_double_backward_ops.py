"""Gradients of gradients through the ops that gained create_graph formulas after the first set
(_core/graph_backward_ops.py, nn/_graph_backward.py): each op's first gradients and the gradients of a penalty on
them against PyTorch's in float64, on the CPU and on CUDA; then a SIREN's Laplacian and a minibatch-stddev
critic under an R1 penalty, as those papers' code writes them."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)
from double_backward_util import _tensors, check_second_order

torch = pytest.importorskip("torch")

R = np.random.RandomState(2)
X, Y = R.randn(3, 4), R.randn(3, 4)
UNIT = R.uniform(-0.9, 0.9, (3, 4))
POS = R.rand(3, 4) + 0.5
IMG = R.randn(2, 3, 5, 5)


def _F(lib):
    return lib.nn.functional


def _on(lib, x, arr, dtype=None):
    return lib.tensor(arr, dtype=dtype).to(x.device)


# name -> (fn(lib, *tensors) -> a scalar, the inputs)
CASES = {
    "sin cos tan": (lambda L, a: (a.sin() * a.cos() + (a * 0.5).tan() ** 2).sum(), (X,)),
    "asin acos atan": (lambda L, a: (a.asin() ** 2 + a.acos() * a + a.atan() ** 3).sum(), (UNIT,)),
    "sinh cosh": (lambda L, a: (a.sinh() * a.cosh() ** 2).sum(), (X,)),
    "erf erfc": (lambda L, a: (a.erf() ** 3 + a.erfc() * a).sum(), (X,)),
    "log1p expm1 log2 log10 exp2": (lambda L, a: (a.log1p() ** 2 + a.expm1() * a + a.log2() * a.log10()
                                                  + a.exp2() ** 2).sum(), (POS,)),
    "exact gelu (erf) to third order": (lambda L, a: (_F(L).gelu(a) ** 2).sum(), (X,)),
    "var std": (lambda L, a: (a.var(1) ** 2).sum() + a.std(0, keepdim=True).sum() + a.var(unbiased=False) ** 2
                + (a.std() * a).sum(), (X,)),
    "amax amin max min": (lambda L, a: (a.amax(1) ** 2).sum() + (a.amin(0, keepdim=True) ** 3).sum()
                          + a.max() ** 2 + a.min() * a.sum(), (X,)),
    "max min along a dim": (lambda L, a: (a.max(1)[0] ** 2).sum() + (a.min(0, keepdim=True).values ** 3).sum()
                            + (L.max(a * a, dim=-1).values * a[:, 0]).sum(), (X,)),
    "atan2": (lambda L, a, b: (L.atan2(a, b) ** 2).sum() + (L.atan2(a * b, POS.shape[0] + b * b) * a).sum(), (X, Y)),
    "fmod remainder": (lambda L, a, b: (L.fmod(a * 3, b) ** 2 + (a * 3 % b) * a + L.remainder(a, 0.7) ** 3).sum(),
                       (X, POS)),
    "round floor ceil": (lambda L, a: ((a * 3).round() * a ** 2 + a.floor() * a + (a.ceil() * a) ** 2).sum(), (X,)),
    "masked_fill_ in a graph": (lambda L, a: ((a * a).masked_fill_(_on(L, a, X > 0.5), 0.25) ** 2 * a).sum(), (X,)),
    "prelu per channel and shared": (lambda L, x, w, v: (_F(L).prelu(x, w) ** 3).sum()
                                     + (_F(L).prelu(x * 2, v) ** 2).sum(), (IMG, R.rand(3), R.rand(1))),
    "prod": (lambda L, a: a.prod() * 2 + (a.prod(1) ** 2).sum() + (a.prod(0, keepdim=True) * a).sum(), (POS,)),
    "index assignment, third order": (lambda L, a: ((lambda z: (z.__setitem__(0, a[1] ** 2 * a[0]) or z))(
        a * 1.0) ** 3).sum(), (X,)),
    "scatter_add scatter index_add index_copy": (lambda L, a: (L.zeros(2, 4, dtype=L.float64).to(a.device).scatter_add(
        0, _on(L, a, [[0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 0, 1]]), a ** 2) ** 2).sum()
        + (a.scatter(1, _on(L, a, [[0], [2], [3]]), a[:, 1:2] * a[:, 2:3]) ** 3).sum()
        + (L.zeros(4, 4, dtype=L.float64).to(a.device).index_add(0, _on(L, a, [3, 0, 3]), a * a, alpha=2.0) ** 2).sum()
        + (a.index_copy(0, _on(L, a, [2, 0]), a[:2] * 3) ** 3).sum(), (X,)),
    "cumsum": (lambda L, a: (a.cumsum(1) ** 3).sum() + (L.cumsum(a * a, 0) * a).sum(), (X,)),
    "unfold windows": (lambda L, a: (a.unfold(1, 2, 1) ** 3).sum() + (a.unfold(0, 2, 1).tanh() * 2).sum(), (X,)),
    "diagonal diag_embed": (lambda L, a: (a.diagonal(1) ** 3).sum() + (L.diag_embed(a * a) ** 2).sum()
                            + (L.diag(a[0]) @ a.t()).pow(2).sum(), (X,)),
    "advanced index with repeats": (lambda L, a: (a[_on(L, a, [0, 2, 0, 0])] ** 3).sum()
                                    + (a[:, _on(L, a, [3, 3, 1])] * a[0, :3]).sum() ** 2, (X,)),
    "several tensor indices": (lambda L, a: (a[_on(L, a, [0, 2, 0]), _on(L, a, [1, 1, 3])] ** 3).sum()
                               + (a[_on(L, a, [[1], [2]]), _on(L, a, [0, 0, 2])] * a[0, :3]).sum() ** 2, (X,)),
    "boolean mask index": (lambda L, a: (a[_on(L, a, X > 0)] ** 3).sum(), (X,)),
    "nll_loss of log_softmax": (lambda L, a, w: _F(L).nll_loss(_F(L).log_softmax(a @ w, 1), _on(L, a, [0, 2, 1]))
                                + _F(L).nll_loss(_F(L).log_softmax(a @ w, 1), _on(L, a, [2, 2, -100]),
                                                 weight=_on(L, a, [1.0, 0.5, 2.0], L.float64), reduction="sum"),
                                (X, R.randn(4, 3))),
    "nll_loss none, spatial": (lambda L, x: (_F(L).nll_loss(x.log_softmax(1), _on(L, x, np.arange(50).reshape(
        2, 5, 5) % 3), reduction="none") ** 2).sum(), (IMG,)),
    "binary_cross_entropy_with_logits": (lambda L, a: _F(L).binary_cross_entropy_with_logits(
        a * 2, _on(L, a, (X > 0) * 1.0, L.float64)) + _F(L).binary_cross_entropy_with_logits(
        a, _on(L, a, POS / 2, L.float64), weight=_on(L, a, POS[0], L.float64),
        pos_weight=_on(L, a, [1.0, 2.0, 0.5, 3.0], L.float64), reduction="sum")
        + (_F(L).binary_cross_entropy_with_logits(a, _on(L, a, POS / 2, L.float64), reduction="none") ** 2).sum(),
        (X,)),
    "embedding with a padding row": (lambda L, w: (_F(L).embedding(_on(L, w, [[0, 2, 2], [1, 0, 2]]), w,
                                                                   padding_idx=1) ** 3).sum(), (X,)),
    "conv_transpose2d": (lambda L, x, w, b: (_F(L).conv_transpose2d(x, w, b, stride=2, padding=1,
                                                                   output_padding=1) ** 3).sum(),
                         (IMG, R.randn(3, 2, 3, 3), R.randn(2))),
    "conv_transpose2d groups dilation unbatched": (lambda L, x, w: (_F(L).conv_transpose2d(
        x, w, stride=2, groups=2, dilation=2) ** 3).sum(), (R.randn(4, 3, 3), R.randn(4, 1, 2, 2))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_second_order_gradients_match_pytorch(case, device):
    fn, arrs = CASES[case]
    check_second_order(torch, fn, arrs, device)


def _siren_laplacian(lib, params, coords):
    """A SIREN (sine activations, w0 = 30 in the first layer) fitted to a Poisson equation: the loss is on the
    Laplacian of its output, two create_graph gradients deep, and training differentiates that once more."""
    w1, b1, w2, b2, w3, b3 = params
    h = (30.0 * (coords @ w1 + b1)).sin()
    h = (h @ w2 + b2).sin()
    u = h @ w3 + b3
    du = lib.autograd.grad(u, coords, lib.ones_like(u), create_graph=True)[0]
    lap = 0
    for i in range(coords.shape[1]):
        lap = lap + lib.autograd.grad(du[:, i], coords, lib.ones_like(du[:, i]), create_graph=True)[0][:, i]
    return ((lap + 1.0) ** 2).mean() + (u ** 2).mean()


def test_siren_poisson_gradients_match_pytorch():
    arrs = [R.uniform(-0.5, 0.5, (2, 16)) / 2, R.randn(16) * 0.1, R.randn(16, 16) / 4, R.randn(16) * 0.1,
            R.randn(16, 1) / 4, R.randn(1) * 0.1]
    coords = R.uniform(-1, 1, (8, 2))

    def run(lib):
        params = _tensors(lib, arrs, "cpu")
        c = lib.tensor(coords, requires_grad=True)
        loss = _siren_laplacian(lib, params, c)
        loss.backward()
        return [loss] + [p.grad for p in params]

    for a, b in zip(run(gm), run(torch)):
        np.testing.assert_allclose(to_np(a.detach()), b.detach().numpy(), rtol=1e-9, atol=1e-12)


def _stddev_critic(lib, x, w1, w2, wfc):
    """ProGAN / StyleGAN's discriminator tail: the minibatch standard deviation appended as a feature map."""
    F = lib.nn.functional
    h = F.leaky_relu(F.conv2d(x, w1, padding=1), 0.2)
    std = (h.var(0, unbiased=False) + 1e-8).sqrt().mean()
    h = lib.cat([h, std.expand(h.shape[0], 1, h.shape[2], h.shape[3])], 1)
    h = F.leaky_relu(F.conv2d(h, w2, stride=2), 0.2)
    return F.linear(h.flatten(1), wfc)


def test_r1_penalty_through_minibatch_stddev_matches_pytorch():
    arrs = [R.randn(3, 2, 3, 3) / 3, R.randn(4, 4, 3, 3) / 4, R.randn(1, 16) / 4]
    real = R.randn(4, 2, 6, 6)

    def run(lib):
        params = _tensors(lib, arrs, "cpu")
        x = lib.tensor(real, requires_grad=True)
        out = _stddev_critic(lib, x, *params)
        grad, = lib.autograd.grad(out.sum(), x, create_graph=True)
        loss = lib.nn.functional.softplus(-out).mean() + 5.0 * grad.pow(2).flatten(1).sum(1).mean()
        loss.backward()
        return [loss] + [p.grad for p in params]

    for a, b in zip(run(gm), run(torch)):
        np.testing.assert_allclose(to_np(a.detach()), b.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_third_order_through_indexing_matches_pytorch():
    """grad of grad of grad: the index's backward (an index assignment) is differentiated twice more."""
    def run(lib):
        a = lib.tensor([1.5, -0.3], dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad(a[0] ** 2 * a[1] ** 3, a, create_graph=True)
        h, = lib.autograd.grad(g.sum(), a, create_graph=True)
        k, = lib.autograd.grad((h * h).sum(), a)
        return [g, h, k]
    for a, b in zip(run(gm), run(torch)):
        np.testing.assert_allclose(to_np(a.detach()), b.detach().numpy(), rtol=1e-12)


def test_prod_with_zeros_says_so():
    x = gm.tensor([1.0, 0.0, 2.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="holding zeros"):
        gm.autograd.grad(x.prod(), x, create_graph=True)
