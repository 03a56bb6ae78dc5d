"""More of torch.nn.functional, the second half of _functional_extra.py: lp_pool1d/2d, max_pool*_with_indices,
max_unpool1d/2d, the deprecated upsample aliases of interpolate, and the margin losses (multi_margin_loss,
multilabel_margin_loss, triplet_margin_with_distance_loss) and embedding_bag. Composed of the core's differentiable
ops."""
import warnings

from .._core.activation import _check_tensor
from .._core.autocast import float32_op
from .._core.creation import arange, cat, ones, tensor, zeros
from .._core.dtype import float32, int64
from .._core.tensor_select import _host
from ._args import _pair, check_reduction
from ._functional_layers import _embedding_renorm_, embedding
from ._functional_more import pairwise_distance
from ._functional_nn import relu
from ._functional_pool import avg_pool2d, interpolate, max_pool2d
from ._functional_pool1d import _single, avg_pool1d, max_pool1d
from ._functional_volumetric import _triple, avg_pool3d, max_pool3d

__all__ = ["lp_pool1d", "lp_pool2d", "lp_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_unpool1d",
           "max_unpool2d", "upsample", "upsample_nearest", "upsample_bilinear", "multi_margin_loss",
           "multilabel_margin_loss", "triplet_margin_with_distance_loss", "embedding_bag"]


def _reduce(loss, reduction, size_average=None, reduce=None):
    reduction = check_reduction(reduction, size_average, reduce)
    return loss if reduction == "none" else loss.mean() if reduction == "mean" else loss.sum()


# ---- pools -------------------------------------------------------------------------------------------------------
def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, area, avg, mx):
    if norm_type == 0:
        raise ValueError(f"norm_type must be a non-zero value, but got {norm_type}")
    if norm_type == float("inf"):
        return mx(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -mx(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    # the mean of x^p times the window's size: the sum (PyTorch's sign * relu(abs) keeps its gradient at 0 too)
    return (out.sign() * relu(out.abs())).mul(area).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each window)^(1/p) over the last dim (p = norm_type; inf: max of |x|)."""
    _check_tensor(input, "lp_pool1d")
    k = _single(kernel_size, "kernel_size", "lp_pool1d")
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, k, avg_pool1d, max_pool1d)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each window)^(1/p) over the last two dims (p = norm_type; inf: max of |x|)."""
    _check_tensor(input, "lp_pool2d")
    kh, kw = _pair(kernel_size, "kernel_size", "lp_pool2d")
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, kh * kw, avg_pool2d, max_pool2d)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each window)^(1/p) over the last three dims (p = norm_type; inf: max of |x|)."""
    _check_tensor(input, "lp_pool3d")
    kd, kh, kw = _triple(kernel_size, "kernel_size", "lp_pool3d")
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, kd * kh * kw, avg_pool3d, max_pool3d)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """max_pool1d's (output, indices), whatever return_indices says (PyTorch's)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """max_pool2d's (output, indices), whatever return_indices says (PyTorch's)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def _unpool_size(op, input, kernel, stride, padding, output_size):
    n = len(kernel)
    default = [(input.shape[input.ndim - n + d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(n)]
    if output_size is None:
        size = default
    else:
        size = [int(s) for s in output_size]
        if len(size) == n + 2:
            size = size[2:]
        if len(size) != n:
            raise ValueError(f"{op}: output_size should be a sequence containing {n} or {n + 2} elements, but it "
                             f"has a length of '{len(size)}'")
        for d in range(n):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < size[d] < hi:
                raise ValueError(f'{op}: invalid output_size "{tuple(output_size)}" (dim {d} must be between {lo} '
                                 f"and {hi})")
    for d in range(n):
        if size[d] < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size[{d}]={size[d]}")
    return size


def _max_unpool(op, input, indices, size):
    """Scatter each plane's values into a zero plane of `size` at their flat indices (the gradient gathers)."""
    _check_tensor(input, op)
    _check_tensor(indices, op, "indices")
    if input.ndim not in (len(size) + 1, len(size) + 2):
        raise RuntimeError(f"{op}: input to max_unpooling should be a {len(size) + 1}d or {len(size) + 2}d Tensor, "
                           f"but got a tensor with {input.ndim} dimensions")
    if indices.dtype != int64:
        raise RuntimeError(f"{op}: elements in indices should be type int64 but got: "
                           f"{str(indices.dtype).split('.')[-1]}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"{op}: expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    plane = 1
    for s in size:
        plane *= s
    if input._device != "meta" and indices.numel():
        idx = _host(indices, op)
        bad = idx[(idx < 0) | (idx >= plane)]
        if bad.size:
            raise RuntimeError(f"{op}: found an invalid max index: {int(bad[0])} (output volumes are of size "
                               f"{'x'.join(map(str, size))})")
    lead = tuple(input.shape[:input.ndim - len(size)])
    flat_x = input.reshape(lead + (-1,))
    out = zeros(*lead, plane, dtype=input.dtype, device=input._device)
    out = out.scatter(-1, indices.reshape(lead + (-1,)), flat_x)
    return out.reshape(lead + tuple(size))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool1d: each value put back at its index (from return_indices), zeros
    elsewhere; output length (L - 1) * stride - 2 * padding + kernel_size unless output_size says."""
    op = "max_unpool1d"
    _check_tensor(input, op)
    k = (_single(kernel_size, "kernel_size", op),)
    s = k if stride is None else (_single(stride, "stride", op),)
    size = _unpool_size(op, input, k, s, (_single(padding, "padding", op),), output_size)
    return _max_unpool(op, input, indices, size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool2d: each value put back at its flat index h * W + w, zeros elsewhere."""
    op = "max_unpool2d"
    _check_tensor(input, op)
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None else _pair(stride, "stride", op)
    size = _unpool_size(op, input, k, s, _pair(padding, "padding", op), output_size)
    return _max_unpool(op, input, indices, size)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of interpolate (warns, as PyTorch's)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: interpolate(mode="nearest") (warns, as PyTorch's)."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: interpolate(mode="bilinear", align_corners=True) (warns, as PyTorch's)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- margin losses -----------------------------------------------------------------------------------------------
def _class_targets(op, input, target):
    """(N, C) scores of a 2-D, 1-D or 0-d input (one sample of one class: a loss of 0), checked as PyTorch checks
    them."""
    _check_tensor(input, op)
    _check_tensor(target, op, "target")
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or \
            (input.ndim == 1 and input.shape[0] == 0):
        raise RuntimeError(f"{op}: expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if target.dtype != int64:
        raise RuntimeError(f"{op}: expected scalar type Long but found {str(target.dtype).split('.')[-1]} for target")
    return input if input.ndim == 2 else input.reshape(1, -1) if input.ndim else input.reshape(1, 1)


@float32_op
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Per sample: sum over classes i != y of weight[y] * max(0, margin - x[y] + x[i])^p, divided by C."""
    op = "multi_margin_loss"
    reduction = check_reduction(reduction, size_average, reduce)
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got p={p}")
    if weight is not None and weight.ndim != 1:
        raise ValueError(f"{op}: weight must be one-dimensional, got shape {tuple(weight.shape)}")
    x = _class_targets(op, input, target)
    n, c = x.shape
    if target.numel() != n or target.ndim > 1:
        raise RuntimeError(f"{op}: target tensor should be 1-D with size equal to the number of input samples "
                           f"(batch size). Expected target size [{n}], but got {list(target.shape)}. Input has "
                           f"shape {list(input.shape)}.")
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"{op}: inconsistent weight size, expected {c} but got {list(weight.shape)}")
    t = target.reshape(n)
    if t._device != "meta" and n:
        tv = _host(t, op)
        if ((tv < 0) | (tv >= c)).any():
            raise RuntimeError(f"{op}: target out of range: every target must be in [0, {c}), got "
                               f"{int(tv[(tv < 0) | (tv >= c)][0])}")
    col = t.unsqueeze(1)
    m = (margin - x.gather(1, col) + x).clamp(min=0)
    if p == 2:
        m = m * m
    if weight is not None:
        m = m * weight.index_select(0, t).unsqueeze(1)
    is_target = arange(c, device=x._device).unsqueeze(0) == col
    loss = m.masked_fill(is_target, 0.0).sum(1) / c
    if input.ndim < 2 and target.ndim == 0:  # one sample: the loss has the target's shape (PyTorch's)
        loss = loss.squeeze(0)
    return _reduce(loss, reduction)


@float32_op
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample: the target classes are target's entries before its first -1; sum over those j and over the
    other classes i of max(0, 1 - (x[j] - x[i])), divided by C."""
    op = "multilabel_margin_loss"
    reduction = check_reduction(reduction, size_average, reduce)
    x = _class_targets(op, input, target)
    n, c = x.shape
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"{op}: inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    t = target.reshape(n, c)
    if t._device != "meta" and t.numel():
        tv = _host(t, op)
        if ((tv < -1) | (tv >= c)).any():
            raise RuntimeError(f"{op}: argument #2 'target' is out of range: entries must be class indices in "
                               f"[0, {c}) or -1, got {int(tv[(tv < -1) | (tv >= c)][0])}")
    valid = (t != -1) & ((t == -1).long().cumsum(1) == 0)           # (N, C): entries before the first -1
    classes = arange(c, device=x._device)
    # is_target[n, i]: class i is one of sample n's valid targets
    is_target = ((t.unsqueeze(2) == classes) & valid.unsqueeze(2)).any(1)
    x_target = x.gather(1, t.clamp(min=0))                               # (N, C): x[y_j]
    hinge = (1 - x_target.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)     # (N, j, i)
    keep = valid.unsqueeze(2) & is_target.logical_not().unsqueeze(1)
    loss = hinge.masked_fill(keep.logical_not(), 0.0).sum((1, 2)) / c
    if input.ndim < 2:
        loss = loss.squeeze(0)
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) with d = distance_function (default
    pairwise_distance); swap uses min(d(a, n), d(p, n)) for the negative distance."""
    op = "triplet_margin_with_distance_loss"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction; expected 'mean', 'sum' or 'none'")
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check_tensor(t, op, name)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"{op}: the anchor, positive, and negative tensors are expected to have the same number "
                           f"of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and "
                           f"negative {negative.ndim}D inputs")
    d = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = d(anchor, positive), d(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(d(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


# ---- embedding bags ----------------------------------------------------------------------------------------------
def _check_bag_values(op, flat, offsets, rows, include_last_offset):
    """PyTorch's value checks of the indices and offsets (on the host: they read values; meta has none)."""
    if flat._device == "meta":
        return
    idx = _host(flat, op)
    bad = ((idx < 0) | (idx >= rows)).nonzero()[0]
    if bad.size:
        raise RuntimeError(f"{op}: index {int(bad[0])} of input takes value {int(idx[bad[0]])} which is not in the "
                           f"valid range [0, {rows})")
    if offsets is None or not offsets.numel():
        return
    off = _host(offsets, op)
    if off[0] != 0:
        raise RuntimeError(f"{op}: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                           f"from position 0. However, got {int(off[0])}")
    if off[-1] > idx.size:
        raise RuntimeError(f"{op}: offsets[-1] can not be greater than input's length {idx.size} but got "
                           f"offsets[-1] of {int(off[-1])}")
    if (off[1:] < off[:-1]).any():
        raise RuntimeError(f"{op}: offsets must be non-decreasing, got {off.tolist()}")


def _bag_max(emb, keep):
    """Max over dim 1 of (B, L, D) embeddings where keep (B, L); an empty bag gives zeros."""
    any_kept = keep.any(1, keepdim=True)
    filled = emb.masked_fill(keep.logical_not().unsqueeze(2), float("-inf"))
    return filled.max(1)[0].where(any_kept, 0.0) if emb.shape[1] else emb.sum(1)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows: each row of a 2-D input is a bag, or a 1-D input is cut into
    bags at offsets (the last one running to the end, or to offsets[-1] with include_last_offset). padding_idx
    entries are left out of every bag; per_sample_weights scales each entry (mode "sum"); an empty bag gives zeros.
    The indices and offsets are checked on the host (as PyTorch checks them); mode "max" of a 1-D input lays the
    bags out on the host too (so not on meta)."""
    op = "embedding_bag"
    _check_tensor(input, op)
    _check_tensor(weight, op, "weight")
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"{op}: if per_sample_weights ({tuple(per_sample_weights.shape)}) is not None, then it must "
                         f"have the same shape as the input ({tuple(input.shape)})")
    if weight.ndim != 2:
        raise ValueError(f"{op}: weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: if input is 2D, then offsets has to be None, as input is treated is a mini-batch "
                             f"of fixed length sequences. However, found offsets of type {type(offsets)}")
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError(f"{op}: offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError(f"{op}: offsets has to be a 1D Tensor, got shape {tuple(offsets.shape)}")
    else:
        raise ValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode == "max":
        if scale_grad_by_freq:
            raise ValueError(f"{op}: max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError(f"{op}: max mode does not support sparse weights")
    elif mode not in ("sum", "mean"):
        raise ValueError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    for name, t in (("input", input), ("offsets", offsets)):
        if t is not None and str(t.dtype).split(".")[-1] not in ("int64", "int32"):
            raise RuntimeError(f"{op}: expected tensor for argument '{name}' to have one of the following scalar "
                               f"types: Long, Int; but got {str(t.dtype).split('.')[-1]} instead")
    # sparse=True: the gradient is dense here, as embedding's (gm.optim.SparseAdam updates the rows it touches);
    # PyTorch's is a sparse COO tensor
    rows, dim = weight.shape
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise RuntimeError(f"{op}: padding_idx must be within the number of embeddings, {-rows} through "
                               f"{rows - 1}, but got {padding_idx}")
        padding_idx %= rows
    flat = input.reshape(-1).long()
    if offsets is not None:
        offsets = offsets.long()
    _check_bag_values(op, flat, offsets, rows, include_last_offset)
    if max_norm is not None:
        _embedding_renorm_(weight, flat, float(max_norm), float(norm_type))
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"{op}: per_sample_weights was not None. per_sample_weights is only supported for "
                                  f"mode='sum' (got mode='{mode}')")
    emb = embedding(flat, weight, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)  # (n, D); by_freq: all bags
    keep = None if padding_idx is None else flat != padding_idx
    if per_sample_weights is not None:
        emb = emb * per_sample_weights.reshape(-1, 1)
    if input.ndim == 2:
        b, length = input.shape
        keep2 = ones(b, length, dtype=input.dtype, device=input._device).bool() if keep is None else \
            keep.reshape(b, length)
        emb = emb.reshape(b, length, dim)
        if mode == "max":
            return _bag_max(emb, keep2)
        total = emb.masked_fill(keep2.logical_not().unsqueeze(2), 0.0).sum(1)
        if mode == "sum":
            return total
        return total / keep2.sum(1, keepdim=True).clamp(min=1).to(dtype=emb.dtype)
    # 1-D: bag of each entry = (offsets at or before it) - 1, by a cumulative count of the bag starts
    n = flat.shape[0]
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    if bags <= 0:
        return zeros(0, dim, dtype=weight.dtype, device=weight._device) + emb.sum() * 0
    # counted in int64: a half weight's dtype holds integers only to 256 (bfloat16) or 2048 (float16)
    starts = zeros(n + 1, dtype=int64, device=flat._device).index_add(
        0, offsets, ones(offsets.shape[0], dtype=int64, device=flat._device))
    bag = starts.narrow(0, 0, n).cumsum(0) - 1
    inside = bag < bags  # with include_last_offset, the entries from offsets[-1] on belong to no bag
    keep = inside if keep is None else keep & inside
    bag = bag.where(inside, 0)
    if mode == "max":
        counts = _host(bag.masked_fill(keep.logical_not(), -1), op)
        pos = [[] for _ in range(bags)]
        for i, k in enumerate(counts.tolist()):
            if k >= 0:
                pos[k].append(i)
        width = max(len(p) for p in pos)
        # (bags, width) entry positions, n (a zero row appended to emb) filling the short bags
        index = tensor([p + [n] * (width - len(p)) for p in pos], dtype=int64, device=flat._device)
        padded = cat([emb, zeros(1, dim, dtype=emb.dtype, device=emb._device)], 0)
        taken = padded.index_select(0, index.reshape(-1)).reshape(bags, width, dim)
        return _bag_max(taken, index != n)
    # half weights' bags are summed in float32, as PyTorch's kernel does, and rounded once
    acc = float32 if emb.dtype.itemsize < 4 else emb.dtype
    src = emb.masked_fill(keep.logical_not().unsqueeze(1), 0.0).to(acc)
    total = zeros(bags, dim, dtype=acc, device=emb._device).index_add(0, bag, src)
    if mode == "sum":
        return total.to(emb.dtype)
    count = zeros(bags, dtype=acc, device=emb._device).index_add(0, bag, keep.to(dtype=acc))
    return (total / count.clamp(min=1).unsqueeze(1)).to(emb.dtype)
