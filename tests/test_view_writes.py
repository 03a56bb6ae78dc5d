"""In-place writes into views of a tensor that is part of a graph (indexing.write_graph_view): PyTorch records them
on the base (CopySlices), and so must we, whatever view op made the view (transpose, view / reshape, permute,
unsqueeze, diagonal, slices of those) and whatever writes (copy_, add_, mul_, pow_, fill_, zero_, clamp_, in-place
activations). Barlow Twins' loss is the classic user. Values and gradients against PyTorch in float64."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

R = np.random.RandomState(11)
W0, P0 = R.randn(4, 4), R.randn(4)


def _off_diagonal(x):
    n = x.shape[0]
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


CASES = {
    "t()[:, 0].copy_": lambda L, h, p: h.t()[:, 0].copy_(p),
    "view(-1)[:4].add_": lambda L, h, p: h.view(-1)[:4].add_(p),
    "diagonal add_ pow_": lambda L, h, p: L.diagonal(h).add_(-1).pow_(2),
    "diagonal fill_": lambda L, h, p: L.diagonal(h).fill_(0.0),
    "t().mul_": lambda L, h, p: h.t().mul_(p),
    "relu_ of a slice": lambda L, h, p: L.relu_(h[1:]),
    "unsqueeze(0).add_": lambda L, h, p: h.unsqueeze(0).add_(p),
    "permute reshape slice mul_": lambda L, h, p: h.permute(1, 0).reshape(16)[3:7].mul_(p),
    "Barlow Twins": lambda L, h, p: (L.diagonal(h).add_(-1).pow_(2).sum(), _off_diagonal(h).pow_(2).sum()),
    "t()[1].zero_": lambda L, h, p: h.t()[1].zero_(),
    "diagonal clamp_": lambda L, h, p: h.diagonal().clamp_(min=0.5),
    "sigmoid_ of a transposed row": lambda L, h, p: h.t()[2].sigmoid_(),
}


def _run(lib, fn):
    w = lib.tensor(W0, dtype=lib.float64, requires_grad=True)
    p = lib.tensor(P0, dtype=lib.float64, requires_grad=True)
    h = w * 2 + 1
    r = fn(lib, h, p)
    extra = sum(r) if isinstance(r, tuple) else (r ** 2).sum()
    loss = (h * lib.arange(16.0, dtype=lib.float64).view(4, 4)).sum() + extra
    loss.backward()
    return loss.item(), w.grad.numpy(), None if p.grad is None else p.grad.numpy(), h.detach().numpy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_write_into_a_view_of_a_graph_tensor_matches_pytorch(name):
    got, want = _run(gm, CASES[name]), _run(torch, CASES[name])
    assert got[0] == pytest.approx(want[0], rel=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-12)
    assert (got[2] is None) == (want[2] is None)
    if got[2] is not None:
        np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-13)  # the base holds the written values


def test_a_leaf_view_is_still_refused():
    w = gm.ones(3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="view"):  # PyTorch: "a view of a leaf Variable ..."
        w.t().mul_(2)
