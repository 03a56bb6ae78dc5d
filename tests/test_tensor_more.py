"""More of PyTorch's names against PyTorch itself (_core/tensor_more.py, _core/creation_more.py): order statistics,
nan-aware sums, logaddexp / logcumsumexp, repeat_interleave, unfold, the in-place shape forms, type(), sampling
and searching helpers; values and, where PyTorch's are differentiable, gradients; on the CPU and on CUDA."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
X = R.randn(4, 6)
X_TIES = np.array([[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [0.5, 0.5, -1.0, 2.0, 2.0, -1.0]])
POS = R.uniform(0.1, 0.9, (3, 5))

# name -> (function of (lib, tensor), input, differentiable)
CASES = {
    "median": (lambda l, t: l.median(t), X, True),
    "median dim": (lambda l, t: t.median(1).values, X, True),
    "median dim indices": (lambda l, t: t.median(0, keepdim=True).indices, X, False),
    "kthvalue": (lambda l, t: t.kthvalue(2, 1).values, X, True),
    "kthvalue indices": (lambda l, t: l.kthvalue(t, 3, 0)[1], X, False),
    "quantile": (lambda l, t: t.quantile(0.3), X, True),
    "quantile dim, tensor q": (lambda l, t: l.quantile(t, l.tensor([0.1, 0.5, 0.9], dtype=t.dtype, device=t.device),
                                                       dim=1, keepdim=True), X, True),
    "quantile nearest": (lambda l, t: t.quantile(0.625, dim=0, interpolation="nearest"), X, True),
    "quantile midpoint": (lambda l, t: t.quantile(0.4, dim=1, interpolation="midpoint"), X, True),
    "cummax": (lambda l, t: t.cummax(1).values, X_TIES, True),
    "cummax indices": (lambda l, t: t.cummax(1).indices, X_TIES, False),
    "cummin indices": (lambda l, t: l.cummin(t, 0)[1], X_TIES, False),
    "cummin": (lambda l, t: t.cummin(0)[0], X, True),
    "logcumsumexp": (lambda l, t: (t * 300).logcumsumexp(1), X, True),
    "logaddexp": (lambda l, t: t.logaddexp(t.flip(0) * 2), X, True),
    "hypot": (lambda l, t: l.hypot(t, t * 2 + 1), X, True),
    "xlogy": (lambda l, t: t.xlogy(t.abs() + 0.5), X, True),
    "logit": (lambda l, t: t.logit(), POS, True),
    "logit eps": (lambda l, t: l.logit(t * 2 - 0.5, eps=0.1), POS, True),
    "frac": (lambda l, t: (t * 3).frac(), X, True),
    "float_power": (lambda l, t: t.abs().float_power(1.5), X, True),
    "aminmax": (lambda l, t: l.stack(list(t.aminmax(dim=1))), X, False),
    "nansum": (lambda l, t: t.masked_fill(t > 1, float("nan")).nansum(1), X, True),
    "nanmean": (lambda l, t: l.nanmean(t.masked_fill(t > 1, float("nan")), 0), X, True),
    "trace": (lambda l, t: t.trace(), X, True),
    "dist": (lambda l, t: l.dist(t, t.flip(1), 3), X, True),
    "rot90": (lambda l, t: t.rot90(1, (0, 1)) * 1 + 0, X, True),
    "rot90 k=3": (lambda l, t: l.rot90(t, -1, [1, 0]), X, True),
    "fliplr": (lambda l, t: t.fliplr(), X, True),
    "flipud": (lambda l, t: l.flipud(t), X, True),
    "repeat_interleave": (lambda l, t: t.repeat_interleave(2, dim=1), X, True),
    "repeat_interleave counts": (lambda l, t: t.repeat_interleave(l.tensor([1, 0, 3, 2], device=t.device), dim=0),
                                 X, True),
    "repeat_interleave flat": (lambda l, t: l.repeat_interleave(t, 3), X, True),
    "unfold": (lambda l, t: t.unfold(1, 3, 2), X, True),
    "unfold overlapping": (lambda l, t: t.unfold(0, 2, 1) * 2, X, True),
    "unflatten": (lambda l, t: t.unflatten(1, (2, -1)), X, True),
    "take": (lambda l, t: t.take(l.tensor([[0, 5], [23, -1]], device=t.device)), X, True),
    "sum_to_size": (lambda l, t: t.sum_to_size(1, 6), X, True),
    "std_mean": (lambda l, t: l.stack(list(l.std_mean(t, 1))), X, True),
    "var_mean": (lambda l, t: l.stack(list(l.var_mean(t, dim=0, keepdim=True))), X, True),
    "cdist": (lambda l, t: l.cdist(t[:2], t), X, True),
    "cdist p=1": (lambda l, t: l.cdist(t, t[1:3], p=1.0), X, True),
    "broadcast_tensors": (lambda l, t: l.stack(list(l.broadcast_tensors(t[:1], t))), X, True),
    "broadcast_to": (lambda l, t: l.broadcast_to(t[0], (3, 6)), X, True),
    "atleast_2d": (lambda l, t: l.atleast_2d(t[0, 0]), X, True),
    "clone": (lambda l, t: l.clone(t), X, True),
    "moveaxis": (lambda l, t: l.moveaxis(t.reshape(2, 3, 4), 0, 2), X, True),
    "t": (lambda l, t: l.t(t), X, True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_pytorch(name, device):
    fn, x, differentiable = CASES[name]
    a = gm.tensor(x, dtype=gm.float64, device=device, requires_grad=differentiable)
    b = torch.tensor(x, requires_grad=differentiable)
    ya, yb = fn(gm, a), fn(torch, b)
    assert tuple(ya.shape) == tuple(yb.shape), name
    assert str(ya.dtype).split(".")[-1] == str(yb.dtype).split(".")[-1], name
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-12, atol=1e-12, err_msg=name)
    if differentiable:
        w = np.random.RandomState(1).randn(*yb.shape)
        (ya * gm.tensor(w, device=device)).sum().backward()
        (yb * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_median_of_nan_and_of_integers(device):
    for values in ([1.0, float("nan"), 3.0], [4, 1, 3, 2]):
        a, b = gm.tensor(values, device=device), torch.tensor(values)
        np.testing.assert_array_equal(to_np(a.median()), b.median().numpy())


def test_in_place_shape_and_rounding_forms(device):
    a, b = gm.tensor(X, device=device), torch.tensor(X)
    for lib, t in ((gm, a), (torch, b)):
        t.unsqueeze_(0).transpose_(1, 2).squeeze_(0).t_()
        t.mul_(3.3).round_().sign_()
        t.clamp_min_(-0.5).clamp_max_(0.5).clip_(-0.25, 0.25).square_().trunc_()
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(to_np(a), b.numpy())
    # a tensor in a graph is rebased on the view's node, as PyTorch's (test_pytorch_semantics5 checks gradients)
    c = gm.ones(1, 3, device=device, requires_grad=True) * 2
    assert c.squeeze_().shape == (3,) and c.grad_fn is not None
    with pytest.raises(RuntimeError, match="leaf"):
        gm.ones(2, 3, device=device, requires_grad=True).t_()


def test_type_names_and_conversions(device):
    a, b = gm.zeros(2, device=device), torch.zeros(2)
    assert a.type() == ("torch.cuda.FloatTensor" if device == "cuda" else "torch.FloatTensor")
    assert gm.zeros(2, dtype=gm.int64).type() == torch.zeros(2, dtype=torch.int64).type() == "torch.LongTensor"
    assert a.type("torch.DoubleTensor").dtype == gm.float64 and b.type("torch.DoubleTensor").dtype == torch.float64
    assert a.type(gm.int64).dtype == gm.int64
    assert a.nelement() == b.nelement() == 2 and a.is_cpu == (device == "cpu")
    with pytest.raises(ValueError, match="invalid type"):
        a.type("torch.NoSuchTensor")


def test_index_put_accumulates(device):
    a, b = gm.zeros(5, device=device), torch.zeros(5)
    idx = [0, 2, 2, 4]
    a.index_put_((gm.tensor(idx, device=device),), gm.ones(4, device=device), accumulate=True)
    b.index_put_((torch.tensor(idx),), torch.ones(4), accumulate=True)
    np.testing.assert_array_equal(to_np(a), b.numpy())
    c = a.index_put((gm.tensor([1], device=device),), gm.tensor([7.0], device=device))
    assert to_np(c)[1] == 7.0 and to_np(a)[1] == 0.0


def test_searchsorted_bucketize_histc(device):
    seq = [1.0, 3.0, 5.0, 7.0, 9.0]
    vals = [[3.0, 6.0, 9.0], [0.0, 10.0, 5.0]]
    for right in (False, True):
        np.testing.assert_array_equal(
            to_np(gm.searchsorted(gm.tensor(seq, device=device), gm.tensor(vals, device=device), right=right)),
            torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right).numpy())
        np.testing.assert_array_equal(
            to_np(gm.bucketize(gm.tensor(vals, device=device), gm.tensor(seq, device=device), right=right)),
            torch.bucketize(torch.tensor(vals), torch.tensor(seq), right=right).numpy())
    rows = [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]
    np.testing.assert_array_equal(
        to_np(gm.searchsorted(gm.tensor(rows, device=device), gm.tensor([[2.5], [2.0]], device=device), side="right")),
        torch.searchsorted(torch.tensor(rows), torch.tensor([[2.5], [2.0]]), side="right").numpy())
    data = np.random.RandomState(2).randn(100).astype(np.float32)
    for kw in ({"bins": 7}, {"bins": 4, "min": -1, "max": 1}):
        np.testing.assert_array_equal(to_np(gm.histc(gm.tensor(data, device=device), **kw)),
                                      torch.histc(torch.tensor(data), **kw).numpy())


def test_index_grids_and_predicates():
    for fn in ("tril_indices", "triu_indices"):
        for args in ((3, 3), (4, 2, 1), (2, 5, -1)):
            np.testing.assert_array_equal(getattr(gm, fn)(*args).numpy(), getattr(torch, fn)(*args).numpy())
    assert gm.is_nonzero(gm.tensor([2])) and not gm.is_complex(gm.zeros(1))
    assert gm.broadcast_shapes((2, 1), (3,)) == tuple(torch.broadcast_shapes((2, 1), (3,)))


def test_normal_forms_and_statistics(device):
    gm.manual_seed(0)
    x = gm.normal(2.0, 3.0, (20000,), device=device)
    assert tuple(x.shape) == (20000,) and abs(float(x.mean()) - 2.0) < 0.1 and abs(float(x.std()) - 3.0) < 0.1
    m = gm.zeros(3, 4, device=device)
    y = gm.normal(m, gm.full((4,), 0.5, device=device))
    assert tuple(y.shape) == (3, 4) and y.device == m.device
    r = gm.randint_like(m, 3, 9)
    assert r.dtype == gm.float32 and bool(((r >= 3) & (r < 9)).all())


def test_multinomial_draws_follow_the_weights(device):
    gm.manual_seed(1)
    w = gm.tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]], device=device)
    draws = gm.multinomial(w, 4000, replacement=True)
    counts = np.bincount(to_np(draws)[0], minlength=3)
    assert counts[0] == 0 and abs(counts[2] / 4000 - 0.75) < 0.03
    assert (to_np(draws)[1] == 0).all()
    once = gm.multinomial(gm.tensor([1.0, 1.0, 1.0, 0.0], device=device), 3)
    assert sorted(to_np(once).tolist()) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="without replacement"):
        gm.multinomial(gm.tensor([1.0, 1.0]), 3)


def test_median_of_an_empty_tensor_is_nan(device):
    for dtype in ("float32", "float64", "float16"):
        got, want = gm.empty(0, dtype=getattr(gm, dtype), device=device).median(), \
            torch.empty(0, dtype=getattr(torch, dtype)).median()
        assert got.shape == want.shape == () and str(got.dtype).split(".")[-1] == dtype
        assert np.isnan(to_np(got))
