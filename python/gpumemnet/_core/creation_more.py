"""gm.* functions beyond the factories, composed of existing ops: sampling (normal, multinomial, randint_like),
searching (searchsorted, bucketize, histc, on the host as PyTorch's CUDA versions wait too), broadcasting helpers,
cdist, std_mean / var_mean, index grids (tril_indices, triu_indices), atleast_1d/2d, and small predicates."""
import math
import numbers

import numpy as np

from .. import _C
from . import autocast as _amp
from . import hooks
from .autograd import needs_grad, no_grad
from .creation import _need_tensor, cat, rand, randint, randn, where
from .size import Size
from .tensor_select import _host

_I64 = 4


# ---- broadcasting --------------------------------------------------------------------------------------------
def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to, as a torch.Size (PyTorch's)."""
    try:
        return Size(np.broadcast_shapes(*[(s,) if isinstance(s, numbers.Integral) else tuple(s) for s in shapes]))
    except ValueError:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: {shapes}") from None


def broadcast_to(input, size):
    _need_tensor("broadcast_to", input)
    return input.expand(tuple(size))


def broadcast_tensors(*tensors):
    tensors = _tensors("broadcast_tensors", tensors)
    shape = broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(t if tuple(t.shape) == shape else t.expand(shape) for t in tensors)


def atleast_1d(*tensors):
    out = tuple(t.reshape(1) if t.ndim == 0 else t for t in _tensors("atleast_1d", tensors))
    return out[0] if len(out) == 1 else out


def atleast_2d(*tensors):
    out = tuple(t.reshape(1, -1) if t.ndim < 2 else t for t in _tensors("atleast_2d", tensors))
    return out[0] if len(out) == 1 else out


def _tensors(op, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        _need_tensor(op, t, f"tensors[{i}]")
    return tensors


# ---- statistics, distances -------------------------------------------------------------------------------------
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over dim, as two calls would give them."""
    _need_tensor("std_mean", input)
    std = input.std(dim, unbiased, keepdim, correction, _op="std_mean")
    return std, _mean_like(input, dim, keepdim)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _need_tensor("var_mean", input)
    var = input.var(dim, unbiased, keepdim, correction, _op="var_mean")
    return var, _mean_like(input, dim, keepdim)


def _mean_like(input, dim, keepdim):
    """The mean var_mean / std_mean return beside the statistic: over dim (None: every element, kept as size-1 dims
    with keepdim), or over everything for a bool there (the legacy var_mean(input, unbiased), which var / std read)."""
    return input.mean() if dim.__class__ is bool else input.mean(dim, keepdim)


def cdist(x1, x2, p=2.0, compute_mode=None):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): (..., P, R).

    For p = 2 with more than 25 rows on either side (PyTorch's compute_mode default,
    "use_mm_for_euclid_dist_if_necessary"; "use_mm_for_euclid_dist" always) it is PyTorch's matrix product
    |x1|^2 + |x2|^2 - 2 x1 x2^T, clamped at 1e-30 before the square root (so a zero distance has gradient 0): the
    memory of the (P, R) result, where the differences would take P * R * M elements (1.5 GB for a 1000 x 1500 x 128
    retrieval). Otherwise from the differences, as PyTorch's other mode."""
    _need_tensor("cdist", x1, "x1")
    _need_tensor("cdist", x2, "x2")
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: "
                           f"{x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    modes = (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if _amp._state.enabled:  # on both of PyTorch's autocast float32 lists: computed in float32 throughout
        x1, x2 = _amp.fp32(x1, x2)
        with _amp.autocast(_amp._state.device, enabled=False):
            return cdist(x1, x2, p, compute_mode)
    big = x1.shape[-2] > 25 or x2.shape[-2] > 25
    if p == 2 and (compute_mode == "use_mm_for_euclid_dist" or big and compute_mode in modes[:2]):
        n1 = (x1 * x1).sum(-1, keepdim=True)
        n2 = (x2 * x2).sum(-1, keepdim=True)
        a = cat([x1 * -2, n1, n1 * 0 + 1], -1)
        b = cat([x2, n2 * 0 + 1, n2], -1)
        sq = a @ b.transpose(-1, -2)
        # PyTorch's clamp at 0: a point's distance to itself (or a duplicate) is exactly 0, with gradient 0 there
        # (sqrt is only taken where positive, so no inf reaches backward)
        pos = sq > 0
        return where(pos, where(pos, sq, 1.0).sqrt(), 0.0)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == math.inf and needs_grad(x1, x2):
        # PyTorch's cdist gives each coordinate tied for the largest |difference| the whole gradient (its sign);
        # the max's own backward would share it among them: sum the tied ones, less the extra copies' value
        a = diff.abs()
        with no_grad():
            top = a.amax(-1, keepdim=True)
            tied = (a == top).to(a.dtype)
            extra = (tied.sum(-1) - 1) * top.squeeze(-1)
        return (a * tied).sum(-1) - extra
    return diff.norm(p, dim=-1)


# ---- sampling ----------------------------------------------------------------------------------------------------
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Normal draws: elementwise from tensors mean / std (broadcast), or of shape `size` from two numbers."""
    if size is not None:  # PyTorch's (float mean, float std, size) overload, which takes 0-d tensors as numbers
        mean, std = (_as_number("normal", v) for v in (mean, std))
    if isinstance(mean, _C.TensorBase) or isinstance(std, _C.TensorBase):
        if isinstance(std, numbers.Number) and std < 0 or isinstance(std, _C.TensorBase) and \
                std._device != "meta" and bool((std < 0).any()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
        like = mean if isinstance(mean, _C.TensorBase) else std
        shape = broadcast_shapes(tuple(np.shape(mean) if not isinstance(mean, _C.TensorBase) else mean.shape),
                                 tuple(np.shape(std) if not isinstance(std, _C.TensorBase) else std.shape))
        z = randn(*shape, generator=generator, dtype=like.dtype, device=like.device)
        return z * std + mean
    if size is None:
        raise TypeError("normal() with float mean and std needs a size")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    z = randn(*tuple(size), generator=generator, dtype=dtype, device=device)
    out = z * std + mean
    return out.requires_grad_() if requires_grad else out


def _as_number(op, v):
    """A 0-d tensor that does not require grad as the Python number PyTorch's argument parser takes it for."""
    if not isinstance(v, _C.TensorBase):
        return v
    if v.ndim or v.requires_grad:
        raise TypeError(f"{op}() received an invalid combination of arguments - got a Tensor of shape "
                        f"{tuple(v.shape)}{' that requires grad' if v.requires_grad else ''} where a float is "
                        f"expected with size=: (float mean, float std, tuple of ints size), or tensors mean / std "
                        f"without size")
    return v.item()


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False):
    _need_tensor("randint_like", input)
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Indices drawn from the rows of input (non-negative weights): with replacement by the inverse of the
    cumulative distribution, without by the Gumbel top-k trick; the uniform draws come from gm's generator."""
    _need_tensor("multinomial", input)
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    w = _host(input, "multinomial").astype(np.float64).reshape(-1, input.shape[-1])
    if np.any(w < 0) or not np.all(np.isfinite(w)) or np.any(w.sum(1) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0, or a negative, inf or NaN "
                           "probability)")
    n = w.shape[1]
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    u = _host(rand(w.shape[0], num_samples if replacement else n, generator=generator), "multinomial")
    u = u.astype(np.float64)
    if replacement:
        cdf = np.cumsum(w, 1) / w.sum(1, keepdims=True)
        idx = np.stack([np.minimum(np.searchsorted(c, r, side="right"), n - 1) for c, r in zip(cdf, u)])
    else:
        with np.errstate(divide="ignore"):
            keys = np.log(w) - np.log(-np.log(np.clip(u, 1e-300, 1.0)))
        idx = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    idx = idx.astype(np.int64).reshape((num_samples,) if input.ndim == 1 else (w.shape[0], num_samples))
    return _C.from_numpy(np.asarray(idx, order="C"), _I64, input._device)


# ---- searching ---------------------------------------------------------------------------------------------------
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value, the index where it would go in its row of sorted_sequence (1-D, or rows matching input's
    leading dims) to keep it sorted: the first such place, or the last with right=True / side='right'."""
    if not isinstance(sorted_sequence, _C.TensorBase):
        raise TypeError(f"searchsorted(): argument 'sorted_sequence' must be Tensor, not "
                        f"{type(sorted_sequence).__name__}")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"side can only be 'left' or 'right' but got {side}")
        right = side == "right"
    seq = _host(sorted_sequence, "searchsorted")
    scalar = not isinstance(input, _C.TensorBase)
    vals = np.asarray(input) if scalar else _host(input, "searchsorted")
    if sorter is not None:
        if not isinstance(sorter, _C.TensorBase) or sorter._dtype != _I64:
            raise RuntimeError(f"torch.searchsorted(): sorter must be a tensor of long dtype but got dtype "
                               f"{getattr(sorter, 'dtype', type(sorter).__name__)}")
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same size, but got "
                               f"boundary tensor {list(sorted_sequence.shape)} and got sorter tensor "
                               f"{list(sorter.shape)}")
        order = _host(sorter, "searchsorted")
        if order.size and (order.min() < 0 or order.max() >= seq.shape[-1]):
            raise RuntimeError("torch.searchsorted(): sorter index out of range")
        seq = np.take_along_axis(seq, order, -1)
    s = "right" if right else "left"
    if seq.ndim == 1:
        idx = np.searchsorted(seq, vals, side=s)
    else:
        if vals.shape[:-1] != seq.shape[:-1]:
            raise RuntimeError(f"searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                               f"dimensions of boundaries tensor and input value tensor must match, but we got "
                               f"boundaries tensor {list(seq.shape)} and input value tensor {list(vals.shape)}")
        if vals.size == 0:  # nothing to place (NumPy cannot reshape an empty batch to (-1, 0))
            idx = np.zeros(vals.shape, np.int64)
        else:
            idx = np.stack([np.searchsorted(a, v, side=s) for a, v in zip(seq.reshape(-1, seq.shape[-1]),
                                                                            vals.reshape(-1, vals.shape[-1]))])
            idx = idx.reshape(vals.shape)
    dev = sorted_sequence._device
    idx = np.asarray(np.asarray(idx, dtype=np.int32 if out_int32 else np.int64), order="C")
    return _C.from_numpy(idx, 9 if out_int32 else _I64, dev)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value among 1-D sorted boundaries: i with boundaries[i-1] < x <= boundaries[i]
    (boundaries[i-1] <= x < boundaries[i] with right=True), as PyTorch's."""
    if not isinstance(boundaries, _C.TensorBase) or boundaries.ndim != 1:
        raise RuntimeError("boundaries tensor must be 1 dimension")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def histc(input, bins=100, min=0, max=0):  # noqa: A002  (PyTorch's names)
    """Counts in `bins` equal bins over [min, max] (the data's range when both are 0), as input's dtype."""
    _need_tensor("histc", input)
    if input._dtype not in (0, 1, 2, 3):
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{input.dtype}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for bins")
    # PyTorch's arithmetic, in the input's precision (float32 for the half types): the range's ends rounded to it,
    # bin = int((x - lo) * bins / (hi - lo)), x == hi in the last bin; so values on an edge land where PyTorch's do
    ft = np.float64 if input._dtype == 1 else np.float32
    a = _host(input, "histc").astype(ft).reshape(-1)
    lo, hi = ft(min), ft(max)
    if lo == hi and a.size:
        lo, hi = a.min(), a.max()
    if not (np.isfinite(lo) and np.isfinite(hi)):  # PyTorch's refusal (a NaN or an inf gave wrong counts)
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    if lo == hi:
        lo, hi = lo - ft(1), hi + ft(1)
    if lo > hi:
        raise RuntimeError(f"torch.histc: max must be larger than min, but got min {min} max {max}")
    inside = a[(a >= lo) & (a <= hi)]
    with np.errstate(over="ignore", invalid="ignore"):
        pos = ((inside - lo) * ft(bins) / (hi - lo)).astype(np.int64)
    counts = np.bincount(np.minimum(pos, int(bins) - 1), minlength=int(bins))
    out = _C.from_numpy(np.asarray(counts.astype(np.float64), order="C"), 1, input._device)
    return out.to(input.dtype)


# ---- index grids and predicates -------------------------------------------------------------------------------
def _index_grid(rows_cols, row, col, offset, dtype, device):
    for name, v in (("row", row), ("col", col), ("offset", offset)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise TypeError(f"{rows_cols.__name__}(): argument '{name}' must be int, not {type(v).__name__}")
    r, c = rows_cols(int(row), int(offset), int(col))
    out = _C.from_numpy(np.asarray(np.stack([r, c]).astype(np.int64), order="C"), _I64,
                        "cpu" if device is None else str(device))
    return out.to(dtype=dtype) if dtype is not None else out


def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (2, N) row and column indices of the lower triangle of a row x col matrix (on and below offset)."""
    return _index_grid(np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    return _index_grid(np.triu_indices, row, col, offset, dtype, device)


def is_nonzero(input):
    _need_tensor("is_nonzero", input)
    if input.numel() != 1:
        what = "no values" if input.numel() == 0 else "more than one value"
        raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
    return bool(input.item() != 0)


def is_complex(input):
    if isinstance(input, hooks.get("complex").ComplexTensor):
        return True
    _need_tensor("is_complex", input)
    return False  # complex tensors are _core/complex.py's ComplexTensor

