"""nn ops: the losses -- cross_entropy, nll_loss, mse, l1, binary_cross_entropy_with_logits (csrc/ops_loss.c,
kernels/cpu/loss.c, nn/_functional_nn.py).

Each op is checked against a NumPy formula (direct loops for the losses, the independent reference), in float64 and
float32 (float16/bfloat16 where the kernels accept them), its float64 gradient against finite differences
(tests/gradcheck.py), its error paths, and its behaviour on meta (shapes, allocations, no data). Memory claims
in exact allocator bytes: cross_entropy saves its logits, not probabilities."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import _functional_nn as F
from gradcheck import assert_close, gradcheck, to_numpy
from nnops_util import R, T, allocated, class_loss_ref, rng, rounded, stored


# ---- cross_entropy and nll_loss ---------------------------------------------------------------------------------
CE_SHAPES = {"NC": ((5, 4), (5,)), "NCHW": ((2, 3, 2, 3), (2, 2, 3)), "C": ((4,), ())}


def ce_case(shape_name, ignore):
    xs, ts = CE_SHAPES[shape_name]
    C = xs[0] if len(xs) == 1 else xs[1]
    x = R(*xs) * 2
    t = rng.integers(0, C, ts)
    if ignore is not None and t.size > 1:
        t.flat[1] = ignore  # one ignored position
    elif t.size == 1 and t == ignore:
        t = np.zeros_like(t)  # a lone target is never ignored (the mean would be 0/0)
    return x, np.asarray(t, np.int64), C


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, -100, 1])
@pytest.mark.parametrize("shape_name", CE_SHAPES)
def test_cross_entropy(shape_name, ignore, weighted, smoothing, reduction):
    x, t, C = ce_case(shape_name, ignore)
    w = rng.uniform(0.5, 2.0, C) if weighted else None
    ii = -100 if ignore is None else ignore
    kw = dict(weight=None if w is None else T(w), ignore_index=ii, reduction=reduction, label_smoothing=smoothing)
    got = F.cross_entropy(T(x), T(t), **kw)
    ref = class_loss_ref(x, t, w, ii, reduction, smoothing, True)
    assert_close(got, np.asarray(ref), 1e-12, 1e-10, what="cross_entropy float64")
    got32 = F.cross_entropy(T(x, gm.float32), T(t), **kw)
    assert got32.dtype == gm.float32
    assert_close(got32, np.asarray(ref).astype(np.float32), 1e-5, 1e-5, what="cross_entropy float32")
    gradcheck(lambda a: F.cross_entropy(a, T(t), **kw), [T(x, requires_grad=True)], what="cross_entropy")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape_name", CE_SHAPES)
def test_nll_loss(shape_name, weighted, reduction):
    x, t, C = ce_case(shape_name, -100)
    w = rng.uniform(0.5, 2.0, C) if weighted else None
    kw = dict(weight=None if w is None else T(w), reduction=reduction)
    ref = class_loss_ref(x, t, w, -100, reduction, 0.0, False)
    assert_close(F.nll_loss(T(x), T(t), **kw), np.asarray(ref), 1e-12, 1e-10, what="nll_loss")
    gradcheck(lambda a: F.nll_loss(a, T(t), **kw), [T(x, requires_grad=True)], what="nll_loss")
    # nll_loss(log_softmax(x)) is cross_entropy(x)
    assert_close(F.nll_loss(F.log_softmax(T(x), 0 if x.ndim == 1 else 1), T(t), **kw),
                 to_numpy(F.cross_entropy(T(x), T(t), **kw)), 1e-12, 1e-10)


def test_cross_entropy_large_segmentation_tile():
    """Positions beyond one 256-wide tile, float16 and bfloat16 logits."""
    x = R(2, 3, 20, 17) * 4
    t = rng.integers(0, 3, (2, 20, 17))
    ref = class_loss_ref(x, t, None, -100, "mean", 0.1, True)
    assert_close(F.cross_entropy(T(x), T(t), label_smoothing=0.1), np.asarray(ref), 1e-12, 1e-10)
    for dt in (gm.float16, gm.bfloat16):
        ref = class_loss_ref(stored(x, dt), t, None, -100, "none", 0.0, True)
        got = F.cross_entropy(T(x, dt), T(t), reduction="none")
        assert got.dtype == dt
        assert_close(to_numpy(got).astype(np.float64), ref, 1e-2, 1e-2)


def test_cross_entropy_all_ignored_and_extremes():
    x = T(R(3, 4))
    t = T(np.array([-100, -100, -100]))
    assert np.isnan(to_numpy(F.cross_entropy(x, t)))  # 0 / 0, as PyTorch
    assert_close(F.cross_entropy(x, t, reduction="sum"), np.array(0.0), 0, 0)
    a = T(R(3, 4), requires_grad=True)
    F.cross_entropy(a, t).backward()
    assert_close(a.grad, np.zeros((3, 4)), 0, 0)
    big = np.array([[1000.0, -1000.0, 0.0], [-1e4, 1e4, 5.0]])
    ref = class_loss_ref(big, np.array([1, 1]), None, -100, "none", 0.0, True)
    assert_close(F.cross_entropy(T(big), T(np.array([1, 1])), reduction="none"), ref, 1e-9, 1e-12)


def test_cross_entropy_saves_logits_not_probabilities():
    """Backward keeps the logits (alive anyway) and one log-sum-exp per position: no (N, C) probability copy."""
    N, C = 64, 100
    x = gm.randn(N, C, requires_grad=True)
    t = gm.tensor(rng.integers(0, C, N))
    logits = x * 1.0
    before = allocated()
    loss = F.cross_entropy(logits, t)
    assert allocated() - before == rounded(4) + rounded(N * 4)  # the 0-d loss and lse (N,)
    loss.backward()


def test_class_loss_errors():
    x = T(R(4, 3))
    t = T(np.array([0, 1, 2, 1]))
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x, T(np.array([0, 3, 1, 1])))
    with pytest.raises(IndexError, match="target -1 is out of bounds for 3 classes"):
        F.nll_loss(x, T(np.array([0, -1, 1, 1])))
    with pytest.raises(IndexError, match="target -100 is out of bounds"):
        F.cross_entropy(x, T(np.array([0, -100, 1, 1])), ignore_index=2)
    with pytest.raises(TypeError, match="target must be an int64 tensor of class indices, got float64"):
        F.cross_entropy(x, T(np.zeros(4)))
    with pytest.raises(ValueError, match=r"target shape \(3,\) does not match input shape \(4, 3\)"):
        F.cross_entropy(x, T(np.array([0, 1, 2])))
    with pytest.raises(ValueError, match=r"target shape \(2, 4\) does not match input shape \(2, 3, 4, 5\)"):
        F.cross_entropy(T(R(2, 3, 4, 5)), T(np.zeros((2, 4), np.int64)))
    with pytest.raises(ValueError, match=r"weight should have shape \(3,\)"):
        F.cross_entropy(x, t, weight=T(np.ones(4)))
    with pytest.raises(ValueError, match="reduction must be 'none', 'mean' or 'sum'"):
        F.cross_entropy(x, t, reduction="avg")
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\]"):
        F.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="gradients with respect to weight are not supported"):
        F.cross_entropy(x, t, weight=T(np.ones(3), requires_grad=True))
    with pytest.raises(TypeError, match="must be a floating point tensor"):
        F.nll_loss(gm.tensor([[1, 2]]), gm.tensor([0]))
    with pytest.raises(TypeError, match="target must be a Tensor"):
        F.cross_entropy(x, [0, 1, 2, 1])


def test_class_loss_meta():
    x = gm.empty(8, 5, 3, 3, device="meta")
    t = gm.empty(8, 3, 3, dtype=gm.int64, device="meta")
    before = _C.memory_allocated("meta")
    loss, lse, wsum = _C.cross_entropy(x, t, None, -100, 0, 0.0)
    assert tuple(loss.shape) == (8, 3, 3) and tuple(lse.shape) == (8, 3, 3) and math.isnan(wsum)
    assert _C.memory_allocated("meta") - before == 2 * rounded(72 * 4)
    assert tuple(F.cross_entropy(x, t).shape) == ()
    assert tuple(F.nll_loss(x, t, reduction="none").shape) == (8, 3, 3)


# ---- mse, l1, bce with logits -------------------------------------------------------------------------------------
def reduce_ref(v, reduction):
    return v if reduction == "none" else (v.mean() if reduction == "mean" else v.sum())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("which", ["mse", "l1"])
def test_mse_l1(which, reduction):
    fn, ref = (F.mse_loss, lambda d: d * d) if which == "mse" else (F.l1_loss, np.abs)
    x, y = R(3, 4, 2), R(3, 4, 2)
    for dt, (atol, rtol) in ((gm.float64, (1e-12, 1e-10)), (gm.float32, (1e-5, 1e-5))):
        got = fn(T(x, dt), T(y, dt), reduction=reduction)
        assert_close(got, np.asarray(reduce_ref(ref(x - y), reduction)), atol, rtol, what=which)
    gradcheck(lambda a, b: fn(a, b, reduction=reduction), [T(x, requires_grad=True), T(y, requires_grad=True)],
              what=which)
    # l1 at zero difference: subgradient 0, as PyTorch
    a = T(np.array([1.0, 2.0]), requires_grad=True)
    F.l1_loss(a, T(np.array([1.0, 0.0])), reduction="sum").backward()
    assert_close(a.grad, np.array([0.0, 1.0]), 0, 0)


def bce_ref(x, t, w, pw):
    sp = np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)  # softplus(-x)
    lw = 1 + (pw - 1) * t if pw is not None else 1
    loss = (1 - t) * x + lw * sp
    return loss * w if w is not None else loss


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weights", ["none", "class", "full", "channel"])
def test_bce_with_logits(weights, reduction):
    x, t = R(3, 4, 2, 2) * 3, rng.uniform(0, 1, (3, 4, 2, 2))
    w = pw = None
    if weights == "class":  # (C,) of the last dim, the usual multi-label case
        w, pw = rng.uniform(0.5, 2, 2), rng.uniform(0.5, 3, 2)
    elif weights == "full":
        w, pw = rng.uniform(0.5, 2, (3, 4, 2, 2)), rng.uniform(0.5, 3, (4, 2, 2))
    elif weights == "channel":  # (C, 1, 1) against NCHW, and a leading 1
        w, pw = rng.uniform(0.5, 2, (1, 4, 1, 1)), rng.uniform(0.5, 3, (4, 1, 1))
    ref = reduce_ref(bce_ref(x, t, w, pw), reduction)
    kw = dict(weight=None if w is None else T(w), pos_weight=None if pw is None else T(pw), reduction=reduction)
    assert_close(F.binary_cross_entropy_with_logits(T(x), T(t), **kw), np.asarray(ref), 1e-12, 1e-10)
    kw32 = {k: (v.float() if isinstance(v, gm.Tensor) else v) for k, v in kw.items()}
    assert_close(F.binary_cross_entropy_with_logits(T(x, gm.float32), T(t, gm.float32), **kw32),
                 np.asarray(ref), 1e-5, 1e-5)
    gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b, **kw),
              [T(x, requires_grad=True), T(t, requires_grad=True)], what="bce_with_logits")


def test_bce_with_logits_stable():
    x = np.array([-800.0, -30.0, 0.0, 30.0, 800.0])
    t = np.array([1.0, 0.0, 0.5, 1.0, 0.0])
    got = F.binary_cross_entropy_with_logits(T(x), T(t), reduction="none")
    assert_close(got, np.array([800.0, 9.357622968839299e-14, math.log(2), 9.357622968839299e-14, 800.0]),
                 1e-15, 1e-12)
    a = T(x, requires_grad=True)
    F.binary_cross_entropy_with_logits(a, T(t), reduction="sum").backward()
    assert np.isfinite(to_numpy(a.grad)).all()


def test_pointwise_loss_errors_and_meta():
    x = T(R(3, 4))
    with pytest.warns(UserWarning, match="different to the input size"):  # broadcast, as PyTorch's
        F.mse_loss(x, T(R(3, 1)))
    with pytest.raises(ValueError, match=r"size of input \(3, 4\) and of target \(3, 2\) cannot be broadcast"):
        F.mse_loss(x, T(R(3, 2)))
    assert F.l1_loss(x, T(R(3, 4), gm.float32)).dtype == gm.float64  # promoted, as PyTorch's
    with pytest.raises(ValueError, match="reduction must be"):
        F.mse_loss(x, x, reduction=None)
    with pytest.raises(ValueError, match=r"target shape \(4,\) does not match input shape \(3, 4\)"):
        F.binary_cross_entropy_with_logits(x, T(R(4)))
    with pytest.raises(ValueError, match=r"pos_weight shape \(3,\) cannot be broadcast to input shape \(3, 4\)"):
        F.binary_cross_entropy_with_logits(x, x, pos_weight=T(np.ones(3)))
    with pytest.raises(RuntimeError, match="pos_weight requires grad"):
        F.binary_cross_entropy_with_logits(x, x, pos_weight=T(np.ones(4), requires_grad=True))
    m = gm.empty(5, 6, device="meta")
    assert tuple(F.mse_loss(m, m).shape) == () and tuple(F.l1_loss(m, m, reduction="none").shape) == (5, 6)
    assert tuple(F.binary_cross_entropy_with_logits(m, m, pos_weight=gm.ones(6, device="meta")).shape) == ()
