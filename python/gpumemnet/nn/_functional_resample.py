"""F.interpolate's separable resamplers: mode 'linear' (3-D), 'bicubic' (4-D), and antialias=True for 'bilinear'
and 'bicubic' (torchvision's Resize and RandomResizedCrop on tensors, whose default is antialias=True).

Each spatial axis is resampled by a matrix: out = W_h @ x @ W_w^T, W (out x in) holding every output pixel's
weights over the input pixels. The weights are PyTorch's, computed from its documented rules (Keys' cubic with
a = -0.75, or a = -0.5 and a support widened by the scale when antialiasing, as PIL does; border taps clamped);
the products are ordinary differentiable matmuls, so gradients, CUDA and the meta device come with them."""
import math

import numpy as np

from .._core.creation import tensor as _tensor

__all__ = []


def _scale(n_in, n_out, align_corners, factor):
    """PyTorch's area_pixel_compute_scale: input pixels per output pixel."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / factor if factor is not None and factor > 0 else n_in / n_out


def _cubic(x, a):
    x = abs(x)
    if x < 1.0:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2.0:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def _triangle(x):
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _antialias_weights(n_in, n_out, scale, cubic):
    """The antialiasing filter (PIL's): taps over center +- support, support = taps/2 widened by the scale when
    shrinking, weights normalised to sum 1."""
    W = np.zeros((n_out, n_in))
    support = (2.0 if cubic else 1.0) * (scale if scale >= 1.0 else 1.0)
    inv = 1.0 / scale if scale >= 1.0 else 1.0
    for i in range(n_out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        w = np.array([_cubic((j - center + 0.5) * inv, -0.5) if cubic else _triangle((j - center + 0.5) * inv)
                      for j in range(lo, hi)])
        total = w.sum()
        W[i, lo:hi] = w / total if total != 0 else w
    return W


def _interp_weights(n_in, n_out, scale, align_corners, cubic):
    """Plain linear (2 taps) or cubic (4 taps, a = -0.75) interpolation at PyTorch's source coordinates."""
    W = np.zeros((n_out, n_in))
    for i in range(n_out):
        src = scale * i if align_corners else scale * (i + 0.5) - 0.5
        if not cubic:
            src = max(src, 0.0)
            i0 = int(src)
            i1 = i0 + (1 if i0 < n_in - 1 else 0)
            t = src - i0
            W[i, i0] += 1.0 - t
            W[i, i1] += t
            continue
        i0 = math.floor(src)
        t = src - i0
        for k, c in enumerate((_cubic(t + 1.0, -0.75), _cubic(t, -0.75), _cubic(1.0 - t, -0.75),
                               _cubic(2.0 - t, -0.75))):
            W[i, min(max(i0 - 1 + k, 0), n_in - 1)] += c
    return W


def _matrix(n_in, n_out, mode, align_corners, factor, antialias, like):
    scale = _scale(n_in, n_out, align_corners, factor)
    cubic = mode == "bicubic"
    W = _antialias_weights(n_in, n_out, scale, cubic) if antialias else \
        _interp_weights(n_in, n_out, scale, align_corners, cubic)
    return _tensor(W, dtype=like.dtype, device=like.device)


def resample(x, out, mode, align_corners, scales, antialias):
    """x (N, C, *spatial) resampled to `out` spatial sizes by one weight matrix per axis."""
    dtype = x.dtype
    work = x if dtype.is_floating_point and dtype.itemsize >= 4 else x.float()  # half types: float32 products
    lead = tuple(work.shape[:2])
    if work.ndim == 3:  # (N, C, L): x @ W^T
        W = _matrix(work.shape[2], out[0], mode, align_corners, scales and scales[0], antialias, work)
        y = work @ W.t()
    else:
        h, w = work.shape[2:]
        Wh = _matrix(h, out[0], mode, align_corners, scales and scales[0], antialias, work)
        Ww = _matrix(w, out[1], mode, align_corners, scales and scales[1], antialias, work)
        y = (Wh @ work.reshape(-1, h, w)) @ Ww.t()
    return y.reshape(lead + tuple(out)).to(dtype)
