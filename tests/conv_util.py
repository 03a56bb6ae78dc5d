"""Helpers of the convolution tests (tests/test_conv_*.py): seeded data, the NumPy references, and the fixtures
that restore the thread count and the workspace limit a test changes.

The conv2d reference is a direct sum over kernel taps on a zero-padded copy of the input (no im2col, no gemm), so
it shares nothing with the kernels under test; conv_transpose2d has its own scatter reference, and the weight
gradient its own sum."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

_rng = np.random.default_rng(20240612)


def R(*shape):
    return _rng.standard_normal(shape)


def T(a, dtype=None, requires_grad=False):
    return gm.tensor(a, dtype=dtype, requires_grad=requires_grad)


# ---- NumPy references -------------------------------------------------------------------------------------------
def _pads(padding, k, d):
    """(top, bottom, left, right) for an int/pair/'same'/'valid' padding, as PyTorch resolves it."""
    if padding == "valid":
        return (0, 0, 0, 0)
    if padding == "same":
        th, tw = d[0] * (k[0] - 1), d[1] * (k[1] - 1)
        return (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    p = (padding, padding) if isinstance(padding, int) else padding
    return (p[0], p[0], p[1], p[1])


def _two(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def ref_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """out[n, k, p, q] = b[k] + sum_{c, r, s} w[k, c, r, s] * xpad[n, g*Cg + c, p*sh + r*dh, q*sw + s*dw]."""
    st, dl = _two(stride), _two(dilation)
    N, C, H, W = x.shape
    K, Cg, Rk, Sk = w.shape
    pt, pb, pl, pr = _pads(padding, (Rk, Sk), dl)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    P = (H + pt + pb - dl[0] * (Rk - 1) - 1) // st[0] + 1
    Q = (W + pl + pr - dl[1] * (Sk - 1) - 1) // st[1] + 1
    out = np.zeros((N, K, P, Q), np.float64)
    Kg = K // groups
    for g in range(groups):
        xs = xp[:, g * Cg:(g + 1) * Cg]
        for r in range(Rk):
            for s in range(Sk):
                h0, w0 = r * dl[0], s * dl[1]
                patch = xs[:, :, h0:h0 + st[0] * (P - 1) + 1:st[0], w0:w0 + st[1] * (Q - 1) + 1:st[1]]
                out[:, g * Kg:(g + 1) * Kg] += np.einsum("nchw,kc->nkhw", patch, w[g * Kg:(g + 1) * Kg, :, r, s])
    if b is not None:
        out += b[None, :, None, None]
    return out


def ref_conv_transpose2d(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Scatter: every input element adds x[n, ci, h, w] * w[ci, co, r, s] at (h*sh - ph + r*dh, w*sw - pw + s*dw)
    of output channel group*Cog + co; the result is cropped by the padding."""
    st, pd, op, dl = _two(stride), _two(padding), _two(output_padding), _two(dilation)
    N, Ci, H, W = x.shape
    _, Cog, Rk, Sk = w.shape
    Hf = (H - 1) * st[0] + dl[0] * (Rk - 1) + 1 + op[0]
    Wf = (W - 1) * st[1] + dl[1] * (Sk - 1) + 1 + op[1]
    full = np.zeros((N, Cog * groups, Hf, Wf), np.float64)
    Cig = Ci // groups
    for g in range(groups):
        xs = x[:, g * Cig:(g + 1) * Cig]
        for r in range(Rk):
            for s in range(Sk):
                h0, w0 = r * dl[0], s * dl[1]
                rows = slice(h0, h0 + st[0] * (H - 1) + 1, st[0])
                cols = slice(w0, w0 + st[1] * (W - 1) + 1, st[1])
                wg = w[g * Cig:(g + 1) * Cig, :, r, s]
                full[:, g * Cog:(g + 1) * Cog, rows, cols] += np.einsum("nchw,co->nohw", xs, wg)
    out = full[:, :, pd[0]:Hf - pd[0], pd[1]:Wf - pd[1]]
    if b is not None:
        out = out + b[None, :, None, None]
    return out


def _case_ids(c):
    return "-".join(f"{k}{v}" for k, v in c.items())


def ref_conv2d_grad_weight(x, dout, wshape, stride=1, padding=0, dilation=1, groups=1):
    """dw[k, c, r, s] = sum_{n, p, q} dout[n, k, p, q] * xpad[n, g*Cg + c, p*sh + r*dh, q*sw + s*dw]."""
    st, dl = _two(stride), _two(dilation)
    K, Cg, Rk, Sk = wshape
    pt, pb, pl, pr = _pads(padding, (Rk, Sk), dl)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    P, Q = dout.shape[2:]
    dw = np.zeros(wshape)
    Kg = K // groups
    for g in range(groups):
        for r in range(Rk):
            for s in range(Sk):
                h0, w0 = r * dl[0], s * dl[1]
                patch = xp[:, g * Cg:(g + 1) * Cg, h0:h0 + st[0] * (P - 1) + 1:st[0], w0:w0 + st[1] * (Q - 1) + 1:st[1]]
                dw[g * Kg:(g + 1) * Kg, :, r, s] = np.einsum("nkhw,nchw->kc", dout[:, g * Kg:(g + 1) * Kg], patch)
    return dw


# ---- what a test changes, restored -------------------------------------------------------------------------------
@pytest.fixture
def threads():
    prev = gm.get_num_threads()
    yield
    gm.set_num_threads(prev)


@pytest.fixture
def workspace_limit():
    prev = _C.get_conv_workspace_limit()
    yield
    _C.set_conv_workspace_limit(prev)


def _workspace_peak():
    return gm.memory.memory_stats("cpu")["by_category"]["workspace"]["peak"]
