"""Tensor.split / chunk under autograd (_core/indexing.py SplitFn): the pieces are views through one node whose
backward is one cat, as PyTorch's SplitBackward; checked against PyTorch (values, gradients with some pieces unused,
an in-place write into a piece, the node's name), and the bytes backward allocates: one gradient of the input, not
one zero-filled gradient of the whole input per piece."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

R = np.random.default_rng(0)


def _run(lib, a, body):
    x = lib.tensor(a, requires_grad=True)
    out = body(x * 1.0)  # the pieces are views of a tensor in the graph, as a projection's output
    w = [lib.tensor(np.arange(t.numel(), dtype=np.float64).reshape(tuple(t.shape)) / 7.0) for t in out]
    sum(((t * wi).sum() for t, wi in zip(out, w)), lib.tensor(0.0, dtype=lib.float64)).backward()
    return [t.detach().numpy() for t in out], x.grad.numpy()


CASES = {
    "chunk 3 on the last dim": lambda x: x.chunk(3, dim=-1),
    "split sizes on dim 1": lambda x: x.split([1, 3, 2], dim=1),
    "split 4 (a shorter last piece)": lambda x: x.split(4, dim=2),
    "only the middle piece used": lambda x: x.split(2, dim=1)[1:2],
    "only the first piece used": lambda x: x.chunk(3, dim=0)[:1],
}


@pytest.mark.parametrize("case", list(CASES))
def test_split_matches_pytorch(case):
    torch = pytest.importorskip("torch")
    a = R.standard_normal((3, 6, 6))
    ours, theirs = _run(gm, a, CASES[case]), _run(torch, a, CASES[case])
    for got, want in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, atol=1e-12)


# in place here, out of place for PyTorch, which refuses in-place writes into the views of one node
IN_PLACE = {
    "a piece scaled": (lambda x: (lambda q, k: (q.mul_(3.0), k))(*x.chunk(2, dim=-1)),
                       lambda x: (lambda q, k: (q * 3.0, k))(*x.chunk(2, dim=-1))),
    "a piece added to, then read": (lambda x: (lambda q, k: (q.add_(k), k * 2.0))(*x.chunk(2, dim=-1)),
                                    lambda x: (lambda q, k: (q + k, k * 2.0))(*x.chunk(2, dim=-1))),
}


@pytest.mark.parametrize("case", list(IN_PLACE))
def test_a_piece_written_in_place_is_recorded_on_the_input(case):
    """gpumemnet records an in-place write into a piece on the split tensor, as into any slice
    (write_graph_view); the values and gradients are those of the out-of-place form."""
    torch = pytest.importorskip("torch")
    a = R.standard_normal((3, 6, 6))
    ours, theirs = _run(gm, a, IN_PLACE[case][0]), _run(torch, a, IN_PLACE[case][1])
    for got, want in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, atol=1e-12)


def test_split_is_one_node_with_pytorchs_name():
    x = gm.randn(4, 6, requires_grad=True) * 1.0
    a, b, c = x.chunk(3, dim=1)
    assert a.grad_fn is b.grad_fn is c.grad_fn
    assert a.grad_fn.name() == "SplitBackward0"
    with gm.no_grad():
        p, q = x.split(3, dim=1)
    assert p.grad_fn is None and q.grad_fn is None


def test_split_gradient_against_numpy_without_torch():
    """The same, with NumPy alone (the sanitizer stage has no PyTorch): d/dx of sum(w_i * piece_i) is the pieces'
    weights laid side by side, zero where a piece got no gradient."""
    a = R.standard_normal((2, 7))
    x = gm.tensor(a, requires_grad=True)
    p, q, r = (x * 1.0).split([2, 4, 1], dim=1)
    (p * 2.0).sum().backward(retain_graph=True)
    want = np.zeros((2, 7))
    want[:, :2] = 2.0
    np.testing.assert_array_equal(x.grad.numpy(), want)
    x.grad = None
    (r * 5.0 + q.sum()).sum().backward()  # q.sum() reaches each of r's 2 elements
    want = np.zeros((2, 7))
    want[:, 2:6] = 2.0
    want[:, 6] = 5.0
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_split_backward_allocates_one_input_gradient():
    """Attention's q, k, v from one projection: at backward's peak, one gradient of the whole projection (the cat)
    besides a few scalars; one node per piece made a zero-filled whole-size gradient for each piece (5 pieces' bytes
    at the peak here, against 3)."""
    n, e = 64, 96
    x = gm.randn(n, 3 * e, requires_grad=True)
    proj = x * 1.0
    q, k, v = proj.split(e, dim=-1)
    w = gm.full((e,), 2.0, requires_grad=True)  # each piece is kept for w's gradient, as attention keeps q, k, v
    loss = (q * w).sum() + (k * w).sum() + (v * w).sum()
    del q, k, v, proj
    base = _C.memory_allocated("cpu")
    gm.memory.reset_peak_memory_stats("cpu")
    loss.backward()
    piece, whole = n * e * 4, n * 3 * e * 4
    small = 3 * 512  # w's three gradients, 384 bytes each in a 512-byte block
    assert whole <= _C.max_memory_allocated("cpu") - base <= whole + piece + small


def test_gradient_of_gradient_through_split():
    """create_graph=True through the pieces (a gradient penalty over a model that chunks its features): the
    second derivative of sum(p^2 * q) with p, q = x.chunk(2) against the formula."""
    a = R.standard_normal((3, 4))
    x = gm.tensor(a, requires_grad=True)
    p, q = (x * 1.0).chunk(2, dim=1)
    (g,) = gm.autograd.grad((p * p * q).sum(), x, create_graph=True)
    g.sum().backward()
    # g = [2 p q, p^2]; d(sum g)/dp = 2 q + 2 p, d(sum g)/dq = 2 p
    pa, qa = a[:, :2], a[:, 2:]
    np.testing.assert_allclose(x.grad.numpy(), np.concatenate([2 * qa + 2 * pa, 2 * pa], axis=1), rtol=1e-12)
