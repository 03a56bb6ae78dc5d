"""Helpers of the nn ops' tests (tests/test_nnops_*.py): seeded data, allocator byte counts, tolerances per dtype,
and the NumPy references that more than one file checks against (batch norm, softmax, the class losses)."""
import contextlib
import math

import numpy as np

import gpumemnet as gm
from gpumemnet import _C
from gradcheck import to_numpy

rng = np.random.default_rng(1234)


def R(*shape):
    return rng.standard_normal(shape)


def NZ(*shape):
    """Away from 0 on both sides: relu/leaky_relu are not differentiable at 0."""
    return rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def T(a, dtype=None, requires_grad=False):
    return gm.tensor(np.asarray(a), dtype=dtype, requires_grad=requires_grad)


@contextlib.contextmanager
def cuda_autocast(**kwargs):
    """gm.autocast("cuda", ...) with CUDA's op policy on a machine without a GPU, where a plain region disables
    itself as PyTorch's does: meta stands for cuda, as while an estimate for a GPU replays a step."""
    prev = gm._core.autocast.set_meta_stands_for("cuda")
    try:
        with gm.autocast("cuda", **kwargs):
            yield
    finally:
        gm._core.autocast.set_meta_stands_for(prev)


def allocated():
    return _C.memory_allocated("cpu")


def rounded(nbytes):
    """What the allocator reserves for a request (512-byte granules)."""
    return max(512, (nbytes + 511) // 512 * 512)


TOL = {gm.float64: (1e-12, 1e-10), gm.float32: (1e-6, 1e-5), gm.float16: (2e-3, 2e-3), gm.bfloat16: (1.6e-2, 1.6e-2)}
FLOAT_TYPES = [gm.float64, gm.float32, gm.float16, gm.bfloat16]


def stored(a, dtype):
    """a rounded to dtype, as float64 (the reference then sees exactly the tensor's values)."""
    return to_numpy(gm.tensor(a, dtype=dtype)).astype(np.float64)


def bn_ref(x, rm, rv, w, b, training, momentum, eps):
    """Direct per-channel formula. Returns out, new running mean, new running var."""
    C = x.shape[1]
    axes = tuple(d for d in range(x.ndim) if d != 1)
    shape = [1] * x.ndim
    shape[1] = C
    if training:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        n = x.size // C
        rm = None if rm is None else (1 - momentum) * rm + momentum * mean
        rv = None if rv is None else (1 - momentum) * rv + momentum * var * n / (n - 1)
    else:
        mean, var = rm, rv
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out, rm, rv


def softmax_ref(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def class_loss_ref(x, t, w, ignore_index, reduction, eps, from_logits):
    """Direct loops over positions: the independent reference for cross_entropy (from_logits) and nll_loss."""
    C = x.shape[0] if x.ndim == 1 else x.shape[1]
    xs = x.reshape(1, C) if x.ndim == 1 else np.moveaxis(x, 1, -1).reshape(-1, C)
    ts = np.asarray(t).reshape(-1)
    w = np.ones(C) if w is None else w
    losses, wsum = np.zeros(len(ts)), 0.0
    for i, (row, c) in enumerate(zip(xs, ts)):
        if c == ignore_index:
            continue
        if from_logits:
            m = row.max()
            logp = row - (m + math.log(sum(math.exp(v - m) for v in row)))
        else:
            logp = row
        nll = -w[c] * logp[c]
        smooth = -sum(w[k] * logp[k] for k in range(C))
        losses[i] = (1 - eps) * nll + eps / C * smooth
        wsum += w[c]
    if reduction == "none":
        return losses.reshape(np.shape(t))
    return losses.sum() / wsum if reduction == "mean" else losses.sum()
