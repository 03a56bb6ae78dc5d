"""Scans, triangles, diagonals, scatters and value-sized results against PyTorch: values, gradients, dtypes, and the
view semantics a training script relies on (a write into diagonal() reaches the tensor). Each runs on the CPU and
on CUDA (the emulator where there is no GPU)."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")


def _pair(x, device, requires_grad=False, dtype="float64"):
    return (gm.tensor(x, dtype=getattr(gm, dtype), device=device, requires_grad=requires_grad),
            torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=requires_grad))


def _same(ours, theirs, rtol=1e-12, atol=1e-12):
    theirs = theirs.detach()
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(to_np(ours), theirs.double().numpy() if theirs.is_floating_point() else
                               theirs.numpy(), rtol=rtol, atol=atol)


def _grads_match(fn, x, device, rtol=1e-12, atol=1e-12):
    """fn(lib, t) on both libraries: equal values and equal gradients of a random projection of them."""
    a, b = _pair(x, device, requires_grad=True)
    ya, yb = fn(gm, a), fn(torch, b)
    _same(ya, yb, rtol, atol)
    w = np.random.RandomState(9).randn(*tuple(yb.shape))
    (ya * gm.tensor(w, dtype=ya.dtype, device=device)).sum().backward()
    (yb * torch.tensor(w, dtype=yb.dtype)).sum().backward()
    _same(a.grad, b.grad, rtol, atol)


# ---- scans -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 7, 33])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_and_cumprod_values_and_gradients(n, dim, device):
    x = np.random.RandomState(n).uniform(-1.5, 1.5, (n, 5) if dim == 0 else (3, n))
    _grads_match(lambda lib, t: t.cumsum(dim), x, device)
    _grads_match(lambda lib, t: lib.cumprod(t, dim), x, device, rtol=1e-10)


def test_cumprod_gradient_with_zeros_matches_pytorch(device):
    x = np.array([[2.0, 0.0, 3.0, 0.0, 5.0], [1.5, -2.0, 0.0, 4.0, 0.5]])
    _grads_match(lambda lib, t: t.cumprod(1), x, device)


def test_cumsum_of_integers_and_bools_is_int64(device):
    for values in ([3, -1, 4, 1, 5], [True, False, True, True]):
        a, b = gm.tensor(values, device=device), torch.tensor(values)
        _same(a.cumsum(0), b.cumsum(0))
        _same(a.cumprod(0), b.cumprod(0))
    _same(gm.tensor([1, 2, 3], device=device).cumsum(0, dtype=gm.float32),
          torch.tensor([1, 2, 3]).cumsum(0, dtype=torch.float32))


def test_cumsum_of_large_integers_is_exact(device):
    v = [2 ** 40 + 1] * 5
    _same(gm.tensor(v, device=device).cumsum(0), torch.tensor(v).cumsum(0), 0, 0)


def test_logsumexp_values_and_gradients(device):
    x = np.random.RandomState(2).randn(4, 6) * 30
    _grads_match(lambda lib, t: t.logsumexp(1), x, device)
    _grads_match(lambda lib, t: lib.logsumexp(t, (0, 1), keepdim=True), x, device)
    _grads_match(lambda lib, t: t.logsumexp(-2, keepdim=False), x, device)


def test_logsumexp_of_infinite_rows_matches_pytorch(device):
    inf = float("inf")
    x = [[0.0, -inf], [-inf, -inf], [inf, 1.0]]
    a, b = _pair(x, device)
    _same(a.logsumexp(1), b.logsumexp(1))


# ---- triangles and diagonals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [-2, -1, 0, 1, 3])
def test_tril_triu_batched_with_gradients(k, device):
    x = np.random.RandomState(3).randn(2, 4, 5)
    _grads_match(lambda lib, t: t.tril(k) * 2 + lib.triu(t, k), x, device)


def test_tril_of_bools_and_in_place(device):
    m = np.ones((3, 3), dtype=bool)
    _same(gm.tensor(m, device=device).tril(), torch.tensor(m).tril())
    a, b = _pair(np.arange(9.0).reshape(3, 3), device)
    a.triu_(1)
    b.triu_(1)
    _same(a, b)


def test_causal_mask_pattern(device):
    """The attention-mask idiom: ones(n, n).tril() == 0 masked_fill with -inf."""
    for lib in (gm, torch):
        kw = {"device": device} if lib is gm else {}
        mask = lib.ones(4, 4, **kw).tril() == 0
        scores = lib.zeros(4, 4, **kw).masked_fill(mask, float("-inf")).softmax(-1)
        if lib is gm:
            ours = scores
        else:
            theirs = scores
    _same(ours, theirs, 1e-6, 1e-7)


@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 1, 2), (0, 2, 0), (-3, 1, 2)])
def test_diagonal_values_and_gradients(offset, d1, d2, device):
    x = np.random.RandomState(4).randn(3, 4, 5)
    _grads_match(lambda lib, t: t.diagonal(offset, d1, d2), x, device)


def test_diagonal_is_a_view_writes_reach_the_tensor(device):
    a, b = _pair(np.zeros((3, 4)), device)
    a.diagonal().fill_(2.0)
    a.diagonal(1).add_(1.0)
    b.diagonal().fill_(2.0)
    b.diagonal(1).add_(1.0)
    _same(a, b)


def test_diag_both_ways_with_gradients(device):
    v = np.random.RandomState(5).randn(4)
    for k in (-2, 0, 1):
        _grads_match(lambda lib, t: t.diag(k), v, device)
        _grads_match(lambda lib, t: lib.diag(t.outer(t) + 1.0, k), v, device)


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((5, 2), True), ((5, 2), False), ((2, 5), False),
                                        ((3, 3, 3), False)])
def test_fill_diagonal_(shape, wrap, device):
    a, b = _pair(np.zeros(shape), device)
    a.fill_diagonal_(7.0, wrap=wrap)
    b.fill_diagonal_(7.0, wrap=wrap)
    _same(a, b)


# ---- products, tile, nan_to_num, layout names ------------------------------------------------------------------
def test_outer_dot_tile(device):
    v = np.random.RandomState(6).randn(5)
    _grads_match(lambda lib, t: t.outer(t * 2.0), v, device)
    _grads_match(lambda lib, t: lib.dot(t, t + 1.0).reshape(1), v, device)
    _grads_match(lambda lib, t: t.reshape(1, 5).tile(2, 1, 3), v, device)
    _grads_match(lambda lib, t: lib.tile(t, (2,)), v, device)


def test_nan_to_num(device):
    x = [float("nan"), float("inf"), -float("inf"), 1.5]
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        a, b = _pair(x, device, dtype=dtype)
        _same(a.nan_to_num(), b.nan_to_num())
        _same(a.nan_to_num(0.5, 9.0, -9.0), b.nan_to_num(0.5, 9.0, -9.0))
    a, b = _pair(x, device)
    a.nan_to_num_(nan=1.0)
    b.nan_to_num_(nan=1.0)
    _same(a, b)


def test_layout_names(device):
    a = gm.zeros(3, 4, device=device)
    b = torch.zeros(3, 4)
    assert a.stride() == b.stride() and a.t().stride() == b.t().stride() and a.stride(1) == 1
    assert a[1:, 2:].storage_offset() == b[1:, 2:].storage_offset() == 6
    assert a.itemsize == b.itemsize == 4 and a.ndimension() == 2
    assert a.data_ptr() != 0 and a[1].data_ptr() == a.data_ptr() + 4 * 4
    assert gm.zeros(2, device="meta").data_ptr() == 0
    assert tuple(a.mT.shape) == (4, 3) and a.mT.stride() == (1, 4)
    assert gm.Size([2, 3]) == a[:2, :3].shape and gm.Size([2, 3]).numel() == 6


# ---- scatter and index_* ----------------------------------------------------------------------------------------
def test_one_hot_and_label_smoothing_by_scatter(device):
    y = [2, 0, 1, 2]
    for lib in (gm, torch):
        kw = {"device": device} if lib is gm else {}
        target = lib.tensor(y, **kw).unsqueeze(1)
        one_hot = lib.zeros(4, 3, **kw).scatter_(1, target, 1.0)
        smooth = lib.full((4, 3), 0.05, **kw).scatter_(1, target, 0.9)
        if lib is gm:
            ours = (one_hot, smooth)
        else:
            theirs = (one_hot, smooth)
    for o, t in zip(ours, theirs):
        _same(o, t)


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_and_scatter_add_gradients(dim, device):
    r = np.random.RandomState(7)
    x = r.randn(4, 5)
    index = np.stack([r.permutation(5 if dim == 1 else 4)[:3] for _ in range(4 if dim == 1 else 5)])
    index = index if dim == 1 else index.T  # scatter's positions along dim are unique per slice
    s = r.randn(*index.shape)  # PyTorch's backward needs src of index's shape (gpumemnet pads a larger one)
    src_a, src_b = _pair(s, device, requires_grad=True)

    def fn(lib, t):
        src = src_a if lib is gm else src_b
        idx = gm.tensor(index, device=device) if lib is gm else torch.tensor(index)
        return t.scatter(dim, idx, src) * 2.0 + t.scatter_add(dim, idx, src)
    _grads_match(fn, x, device)
    _same(src_a.grad, src_b.grad)


def test_scatter_add_repeats_accumulate(device):
    a, b = _pair(np.zeros(4), device)
    idx = [0, 2, 2, 2, 3]
    src = np.arange(5.0)
    _same(a.scatter_add(0, gm.tensor(idx, device=device), gm.tensor(src, device=device)),
          b.scatter_add(0, torch.tensor(idx), torch.tensor(src)))


def test_index_add_copy_fill_with_gradients(device):
    r = np.random.RandomState(8)
    x, s = r.randn(5, 3), r.randn(2, 3)
    src_a, src_b = _pair(s, device, requires_grad=True)

    def fn(lib, t):
        src = src_a if lib is gm else src_b
        idx = gm.tensor([4, 1], device=device) if lib is gm else torch.tensor([4, 1])
        return (t.index_add(0, idx, src, alpha=2.0) + t.index_copy(0, idx, src) * 3.0
                + t.index_fill(0, idx, -1.0) * 5.0)
    _grads_match(fn, x, device)
    _same(src_a.grad, src_b.grad)


def test_in_place_index_ops_and_recording_in_a_graph(device):
    a, b = _pair(np.zeros((3, 2)), device)
    a.index_add_(0, gm.tensor([0, 0, 2], device=device), gm.ones(3, 2, dtype=gm.float64, device=device))
    b.index_add_(0, torch.tensor([0, 0, 2]), torch.ones(3, 2, dtype=torch.float64))
    a.index_fill_(1, gm.tensor([1], device=device), 9.0)
    b.index_fill_(1, torch.tensor([1]), 9.0)
    _same(a, b)
    # on a tensor in a graph the write is recorded, as PyTorch's: the overwritten entry takes no gradient back
    x = gm.ones(3, device=device, requires_grad=True)
    y = x * 2.0
    y.scatter_(0, gm.tensor([0], device=device), 1.0)
    y.sum().backward()
    assert to_np(x.grad).tolist() == [0.0, 2.0, 2.0]


def test_masked_select_broadcasts_and_is_differentiable(device):
    x = np.random.RandomState(10).randn(3, 4)
    mask = np.array([True, False, True, True])

    def fn(lib, t):
        m = gm.tensor(mask, device=device) if lib is gm else torch.tensor(mask)
        return t.masked_select(m)
    _grads_match(fn, x, device)


# ---- value-sized results -----------------------------------------------------------------------------------------
def test_nonzero_argwhere_count_nonzero(device):
    x = [[0, 1, 0], [2, 0, 3]]
    a, b = gm.tensor(x, device=device), torch.tensor(x)
    _same(a.nonzero(), b.nonzero())
    _same(gm.argwhere(a), torch.argwhere(b))
    for ours, theirs in zip(a.nonzero(as_tuple=True), b.nonzero(as_tuple=True)):
        _same(ours, theirs)
    _same(a.count_nonzero(), b.count_nonzero())
    _same(a.count_nonzero(1), b.count_nonzero(1))
    for v in (5, 0):
        _same(gm.tensor(v, device=device).nonzero(), torch.tensor(v).nonzero())
    assert a.nonzero().device == a.device


def test_unique_and_unique_consecutive(device):
    v = [3, 1, 2, 3, 1, 1, 7]
    a, b = gm.tensor(v, device=device), torch.tensor(v)
    for ours, theirs in zip(a.unique(return_inverse=True, return_counts=True),
                            b.unique(return_inverse=True, return_counts=True)):
        _same(ours, theirs)
    for ours, theirs in zip(a.unique_consecutive(return_inverse=True, return_counts=True),
                            b.unique_consecutive(return_inverse=True, return_counts=True)):
        _same(ours, theirs)
    m = [[1, 2], [0, 5], [1, 2]]
    _same(gm.tensor(m, device=device).unique(dim=0), torch.tensor(m).unique(dim=0))
    _same(gm.tensor([0.5, -1.0, 0.5], device=device).unique(), torch.tensor([0.5, -1.0, 0.5]).unique())


def test_bincount_confusion_matrix_pattern(device):
    """Segmentation metrics: bincount(n * target + pred, minlength=n * n).reshape(n, n)."""
    r = np.random.RandomState(11)
    n = 4
    t, p = r.randint(0, n, 200), r.randint(0, n, 200)
    ours = gm.bincount(gm.tensor(n * t + p, device=device), minlength=n * n).reshape(n, n)
    theirs = torch.bincount(torch.tensor(n * t + p), minlength=n * n).reshape(n, n)
    _same(ours, theirs)
    w = r.rand(200).astype(np.float32)
    _same(gm.tensor(t, device=device).bincount(gm.tensor(w, device=device)),
          torch.tensor(t).bincount(torch.tensor(w)), 1e-6, 1e-6)


def test_negative_bincount_input_is_refused():
    for lib in (gm, torch):
        with pytest.raises(RuntimeError, match="non-negative"):
            lib.tensor([1, -1]).bincount()


def test_meshgrid_ij_and_xy(device):
    for indexing in ("ij", "xy"):
        ours = gm.meshgrid(gm.arange(3, device=device), gm.arange(2, device=device), indexing=indexing)
        theirs = torch.meshgrid(torch.arange(3), torch.arange(2), indexing=indexing)
        for o, t in zip(ours, theirs):
            _same(o, t)
