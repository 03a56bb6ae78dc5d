"""The losses issue 12 added: smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div (one pointwise kernel,
kernels/loss_ops.h's math), their modules, NLLLoss, and CrossEntropyLoss with label smoothing + weight +
ignore_index together (torchvision's reference script's setting).

Each is checked against a NumPy formula written here, float64 gradients of input and target against finite
differences, PyTorch's values and gradients where torch imports, every error path, and meta against the CPU in
exact allocator bytes."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet.nn import functional as F
from gradcheck import assert_close, check_against_torch, gradcheck
from nnops_util import R, T, cuda_autocast, rng

REDUCTIONS = ["mean", "sum", "none"]


def reduce_np(loss, reduction):
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def smooth_l1_np(x, t, beta):
    d = np.abs(x - t)
    return np.where(d < beta, 0.5 * d * d / max(beta, 1e-300), d - 0.5 * beta) if beta > 0 else d


def huber_np(x, t, delta):
    d = np.abs(x - t)
    return np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))


def bce_np(x, t):
    with np.errstate(divide="ignore"):
        return -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))


def kl_np(x, t, log_target):
    if log_target:
        return np.exp(t) * (t - x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, t * (np.log(np.where(t > 0, t, 1.0)) - x), 0.0)


def probs(*shape):
    return rng.uniform(0.05, 0.95, shape)


# name -> (gm function with its option, NumPy loss, input maker, target maker, torch function name, option)
CASES = {
    "smooth_l1": (lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.7), lambda x, t: smooth_l1_np(x, t, 0.7),
                  R, R, "smooth_l1_loss", {"beta": 0.7}),
    "smooth_l1_beta0": (lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.0),
                        lambda x, t: smooth_l1_np(x, t, 0.0), R, R, "smooth_l1_loss", {"beta": 0.0}),
    "huber": (lambda x, t, r: F.huber_loss(x, t, r, delta=0.6), lambda x, t: huber_np(x, t, 0.6), R, R,
              "huber_loss", {"delta": 0.6}),
    "bce": (lambda x, t, r: F.binary_cross_entropy(x, t, reduction=r), bce_np, probs, probs,
            "binary_cross_entropy", {}),
    "kl_div": (lambda x, t, r: F.kl_div(x, t, reduction=r), lambda x, t: kl_np(x, t, False),
               lambda *s: np.log(probs(*s)), probs, "kl_div", {}),
    "kl_div_log_target": (lambda x, t, r: F.kl_div(x, t, reduction=r, log_target=True),
                          lambda x, t: kl_np(x, t, True), lambda *s: np.log(probs(*s)),
                          lambda *s: np.log(probs(*s)), "kl_div", {"log_target": True}),
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", CASES)
def test_pointwise_loss_values_and_gradients(name, reduction):
    fn, ref, mx, mt, _, _ = CASES[name]
    x, t = mx(3, 5), mt(3, 5)
    ref_v = reduce_np(ref(x, t), reduction)
    assert_close(fn(T(x), T(t), reduction), np.asarray(ref_v), 1e-12, 1e-10, what=f"{name} float64")
    got32 = fn(T(x, gm.float32), T(t, gm.float32), reduction)
    assert got32.dtype == gm.float32
    assert_close(got32, np.asarray(ref_v, np.float32), 1e-5, 1e-5, what=f"{name} float32")
    gradcheck(lambda a, b: fn(a, b, reduction), [T(x, requires_grad=True), T(t, requires_grad=True)], what=name)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", CASES)
def test_pointwise_loss_against_torch(name, reduction):
    torch = pytest.importorskip("torch")
    fn, _, mx, mt, tname, opts = CASES[name]
    x, t = mx(2, 3, 4), mt(2, 3, 4)
    if name.startswith("smooth_l1") or name == "huber":
        t.flat[:3] = x.flat[:3] + np.array([0.0, 0.7, -0.6])  # d = 0 and d at the threshold
    check_against_torch(lambda a, b: fn(a, b, reduction),
                        lambda a, b: getattr(torch.nn.functional, tname)(a, b, reduction=reduction, **opts),
                        [x, t], what=name)


def test_bce_clamps_logs_and_gradient_like_torch():
    torch = pytest.importorskip("torch")
    x = np.array([0.0, 1.0, 0.0, 1.0, 1e-30, 0.5])
    t = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.3])
    got = F.binary_cross_entropy(T(x), T(t), reduction="none")
    ref = torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t), reduction="none")
    assert_close(got, ref.numpy(), 1e-12, 1e-10, what="bce at 0 and 1")
    assert float(got.numpy()[2]) == 100.0  # log(0) clamped at -100
    xg = T(x, requires_grad=True)
    F.binary_cross_entropy(xg, T(t)).backward()
    xt = torch.tensor(x, requires_grad=True)
    torch.nn.functional.binary_cross_entropy(xt, torch.tensor(t)).backward()
    assert_close(xg.grad, xt.grad.numpy(), 1e-9, 1e-9, what="bce gradient at 0 and 1 (1e-12 floor)")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_weight(reduction):
    x, t, w = probs(4, 3), probs(4, 3), rng.uniform(0.5, 2.0, 3)
    ref = reduce_np(bce_np(x, t) * w, reduction)
    assert_close(F.binary_cross_entropy(T(x), T(t), T(w), reduction=reduction), np.asarray(ref), 1e-12, 1e-10,
                 what="bce w")
    gradcheck(lambda a: F.binary_cross_entropy(a, T(t), T(w), reduction=reduction), [T(x, requires_grad=True)],
              what="bce weighted")
    torch = pytest.importorskip("torch")
    check_against_torch(lambda a, b: nn.BCELoss(weight=T(w), reduction=reduction)(a, b),
                        lambda a, b: torch.nn.BCELoss(weight=torch.tensor(w), reduction=reduction)(a, b),
                        [x, t], what="BCELoss weight")


def test_kl_div_batchmean_and_zero_targets():
    x, t = np.log(probs(4, 5)), probs(4, 5)
    got = F.kl_div(T(x), T(t), reduction="batchmean")
    assert_close(got, np.asarray(kl_np(x, t, False).sum() / 4), 1e-12, 1e-10, what="batchmean")
    # t = 0: 0 log 0 = 0, and the target's gradient there is 0 where PyTorch's (xlogy's) is NaN: a deliberate
    # difference (kernels/loss_ops.h), so one zero target does not poison a teacher's gradient
    t0 = t.copy()
    t0[0, :2] = 0.0
    a, b = T(x, requires_grad=True), T(t0, requires_grad=True)
    F.kl_div(a, b, reduction="sum").backward()
    assert_close(a.grad, -t0, 1e-12, 1e-12, what="kl_div input grad")
    ref_gt = np.where(t0 > 0, np.log(np.where(t0 > 0, t0, 1)) + 1 - x, 0.0)
    assert_close(b.grad, ref_gt, 1e-12, 1e-10, what="kl_div target grad (0 at t = 0)")
    torch = pytest.importorskip("torch")
    for red in ("batchmean", "sum", "none"):
        check_against_torch(lambda a, b: nn.KLDivLoss(reduction=red)(a, b),
                            lambda a, b: torch.nn.KLDivLoss(reduction=red)(a, b), [x, t], what=f"kl_div {red}")


def test_modules_against_torch():
    torch = pytest.importorskip("torch")
    x, t = R(6, 4), R(6, 4)
    for gm_m, th_m in ((nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5)),
                       (nn.HuberLoss(reduction="sum", delta=2.0), torch.nn.HuberLoss(reduction="sum", delta=2.0)),
                       (nn.SmoothL1Loss(reduction="none"), torch.nn.SmoothL1Loss(reduction="none"))):
        check_against_torch(gm_m, th_m, [x, t], what=type(gm_m).__name__)
    logp = np.log(probs(6, 4))
    tgt = np.array([0, 3, -100, 1, 2, 3])
    check_against_torch(lambda a: nn.NLLLoss(weight=T(np.arange(1.0, 5.0)))(a, T(tgt)),
                        lambda a: torch.nn.NLLLoss(weight=torch.arange(1.0, 5.0, dtype=torch.float64))(
                            a, torch.tensor(tgt)), [logp], what="NLLLoss")


@pytest.mark.parametrize("shape", [(6, 5), (2, 5, 3, 4)])
def test_cross_entropy_label_smoothing_weight_ignore_index_like_torch(shape):
    """torchvision's classification reference uses label_smoothing=0.1; segmentation ignore_index=255 + weight."""
    torch = pytest.importorskip("torch")
    x = R(*shape)
    t = rng.integers(0, 5, (shape[0],) + shape[2:])
    t.flat[::3] = 255
    w = rng.uniform(0.5, 2.0, 5)
    for red in REDUCTIONS:
        check_against_torch(
            lambda a: nn.CrossEntropyLoss(weight=T(w), ignore_index=255, reduction=red, label_smoothing=0.1)(a, T(t)),
            lambda a: torch.nn.CrossEntropyLoss(weight=torch.tensor(w), ignore_index=255, reduction=red,
                                                label_smoothing=0.1)(a, torch.tensor(t)),
            [x], atol=1e-10, rtol=1e-9, what=f"cross_entropy {shape} {red}")


def test_errors():
    x = T(R(3, 4))
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values for delta"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(TypeError, match="beta must be a number"):
        F.smooth_l1_loss(x, x, beta="1")
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(T(np.array([0.5, 1.5])), T(np.array([0.0, 1.0])))
    with pytest.raises(ValueError, match=r"target shape \(3, 1\) does not match input shape \(3, 4\)"):
        F.binary_cross_entropy(T(probs(3, 4)), T(probs(3, 1)))
    with pytest.raises(ValueError, match=r"size of input \(3, 4\) and of target \(3,\) cannot be broadcast"):
        F.kl_div(x, T(R(3)))
    with pytest.raises(ValueError, match="reduction must be"):
        F.huber_loss(x, x, reduction="batchmean")
    with pytest.raises(RuntimeError, match="weight requires grad"):
        F.binary_cross_entropy(T(probs(3, 4)), T(probs(3, 4)), weight=T(np.ones(4), requires_grad=True))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.SmoothL1Loss(reduction="avg")


def _peak_bytes(device, fn):
    gm.memory.reset_peak_memory_stats(device)
    base = gm.memory.memory_allocated(device)
    fn()
    return gm.memory.max_memory_allocated(device) - base


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_meta_bytes_equal_cpu(name, reduction):
    fn, _, mx, mt, _, _ = CASES[name]
    x, t = mx(7, 9), mt(7, 9)

    def run(device):
        a = T(x, gm.float32).to(device).requires_grad_()
        b = T(t, gm.float32).to(device).requires_grad_()

        def step():
            out = fn(a, b, reduction)
            assert tuple(out.shape) == (() if reduction != "none" else (7, 9))
            out.sum().backward()
        return _peak_bytes(device, step)
    assert run("meta") == run("cpu") > 0


def test_autocast_runs_losses_in_float32():
    x, t = probs(4, 3), probs(4, 3)
    with gm.autocast("cpu", dtype=gm.bfloat16):
        for fn in (F.smooth_l1_loss, F.huber_loss, F.binary_cross_entropy, F.kl_div):
            out = fn(T(x, gm.bfloat16), T(t, gm.bfloat16))
            assert out.dtype == gm.float32, fn.__name__
        assert F.binary_cross_entropy(T(x, gm.bfloat16), T(t, gm.bfloat16),
                                      T(np.ones(3), gm.bfloat16)).dtype == gm.float32
    with cuda_autocast(enabled=True):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(T(x, gm.float32), T(t, gm.float32))


@pytest.mark.parametrize("shape", [(5, 4), (2, 4, 3, 2), (4,)])
def test_cross_entropy_probability_targets_like_torch(shape):
    """torchvision's mixup/cutmix hand CrossEntropyLoss(label_smoothing=0.1) soft targets."""
    torch = pytest.importorskip("torch")
    x = R(*shape)
    t = probs(*shape)
    t /= t.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
    w = rng.uniform(0.5, 2.0, 4)
    for red in REDUCTIONS:
        for kw in ({}, {"label_smoothing": 0.1}, {"weight": w, "label_smoothing": 0.2}):
            gkw = {k: (T(v) if k == "weight" else v) for k, v in kw.items()}
            tkw = {k: (torch.tensor(v) if k == "weight" else v) for k, v in kw.items()}
            check_against_torch(lambda a, b: F.cross_entropy(a, b, reduction=red, **gkw),
                                lambda a, b: torch.nn.functional.cross_entropy(a, b, reduction=red, **tkw),
                                [x, t], atol=1e-12, rtol=1e-10, what=f"soft-target cross_entropy {red} {kw}")
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point target"):
        F.cross_entropy(T(x), T(t), ignore_index=1)
