"""bfloat16 convolutions of deep layers on large maps (VGG's 256 channels at 16x16: at least 256 output channels
and 256 positions), where the half-precision backward plans once left one row of columns per product
(kernels/cpu/conv_plan.c, CONV_HALF_MIN_ROWS) and the bfloat16 weight-gradient fills its buffer with bfloat16
rows (kernels/cpu/conv_half.c, conv2d_backward_weight_bf16): every pass on both routes (GPUMEMNET_BF16_CONV=gemm
and =widen, read per call) and on the measured rule, at 1 and 2 threads, against a float64 NumPy reference of the
same bfloat16 inputs. Each result is a float32 sum rounded once to bfloat16: within half an ulp (2^-8 relative)
of the exact value, plus the float32 sum's error, bounded here by 2^-14 of the sum of the terms' magnitudes."""
import functools

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet import _C

# (N, C, H=W, K, kernel, stride, padding)
SHAPES = [(2, 256, 16, 256, 3, 1, 1), (2, 128, 16, 320, 3, 1, 1), (1, 96, 20, 288, 3, 2, 1)]


def _windows(x, R, s, p):
    """(N, C, P, Q, R, R) windows of x padded by p, stride s."""
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    v = np.lib.stride_tricks.sliding_window_view(xp, (R, R), axis=(2, 3))
    return v[:, :, ::s, ::s]


def _reference(x, w, go, s, p):
    """float64 forward, input-gradient and weight-gradient, and the same of the terms' magnitudes."""
    N, C, H, _ = x.shape
    K, _, R, _ = w.shape
    out = {}
    for name, xx, ww, gg in (("val", x, w, go), ("abs", np.abs(x), np.abs(w), np.abs(go))):
        win = _windows(xx, R, s, p)
        fwd = np.einsum("ncpqrs,kcrs->nkpq", win, ww, optimize=True)
        dw = np.einsum("ncpqrs,nkpq->kcrs", win, gg, optimize=True)
        dxp = np.zeros((N, C, H + 2 * p, H + 2 * p))
        P, Q = gg.shape[2:]
        for r in range(R):
            for t in range(R):
                dxp[:, :, r:r + s * P:s, t:t + s * Q:s] += np.einsum("nkpq,kc->ncpq", gg, ww[:, :, r, t])
        out[name] = (fwd, dxp[:, :, p:p + H, p:p + H], dw)
    return out


@functools.lru_cache(maxsize=None)
def _case(shape):
    """The bfloat16 operands of `shape` and their float64 reference results."""
    N, C, H, K, R, s, p = shape
    rng = np.random.default_rng(sum(shape))
    x, w = _bf16(rng.standard_normal((N, C, H, H))), _bf16(rng.standard_normal((K, C, R, R)) / (C * R * R) ** 0.5)
    P = (H + 2 * p - R) // s + 1
    go = _bf16(rng.standard_normal((N, K, P, P)))
    return x, w, go, _reference(*(t.float().numpy().astype(np.float64) for t in (x, w, go)), s, p)


def _bf16(a):
    return gm.tensor(a.astype(np.float32)).to(gm.bfloat16)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("route", [None, "gemm", "widen"])
def test_deep_bf16_conv_matches_float64(shape, threads, route, monkeypatch):
    s, p = shape[5:]
    x, w, go, ref = _case(shape)
    if route:
        monkeypatch.setenv("GPUMEMNET_BF16_CONV", route)
    else:
        monkeypatch.delenv("GPUMEMNET_BF16_CONV", raising=False)
    old = gm.get_num_threads()
    gm.set_num_threads(threads)
    try:
        fwd = F.conv2d(x, w, None, s, p)
        dx = _C.conv2d_backward(go, x, w, (s, s), (p, p), (1, 1), 1, (True, False, False), tuple(x.shape),
                                tuple(w.shape))[0]
        dw = _C.conv2d_backward(go, x, w, (s, s), (p, p), (1, 1), 1, (False, True, False), tuple(x.shape),
                                tuple(w.shape))[1]
    finally:
        gm.set_num_threads(old)
    for name, got, val, mag in zip(("forward", "input-gradient", "weight-gradient"), (fwd, dx, dw), ref["val"],
                                   ref["abs"]):
        assert got.dtype == gm.bfloat16
        got = got.float().numpy().astype(np.float64)
        err = np.abs(got - val)
        bound = 2.0 ** -8 * np.abs(val) + 2.0 ** -14 * mag
        assert (err <= bound).all(), (name, float((err / bound).max()))
