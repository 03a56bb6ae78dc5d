"""torch.segment_reduce: sum / mean / max / min / prod over consecutive segments of one axis, given by lengths or
offsets, with PyTorch's signature, checks and gradients.

Composed of the core's tensor ops, so it runs on any device: each position along the axis gets the number of its
segment (searchsorted of the segment starts), and scatter_add / scatter_reduce gather the segments. Positions
outside every segment (offsets that do not cover the axis, as PyTorch's unchecked offsets allow) go to one extra
segment that is dropped. The gradient is PyTorch's formula, its details included: a max / min gradient is shared
by the tied elements only when it is positive (PyTorch's kernel divides only positive entries), the initial value
never takes a share, and a prod's zero (or NaN) element gets the product of the others."""
import math

import numpy as np

from . import _C
from ._core.autograd import Function, no_grad
from ._core.creation import arange, cat, full, where, zeros
from ._core.creation_more import searchsorted

__all__ = ["segment_reduce"]

_REDUCES = {"sum": "sum", "mean": "mean", "max": "max", "amax": "max", "min": "min", "amin": "min",
            "prod": "prod"}
_INTS = ("int64", "int32")
# the names PyTorch's "not implemented for" errors give the dtypes
_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
                 "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def _dtype_name(t):
    return str(t.dtype).split(".")[-1]


def _scalar_name(t):
    return _SCALAR_NAMES.get(_dtype_name(t), _dtype_name(t))


def _check(data, reduce, lengths, indices, offsets, axis, unsafe):
    """PyTorch's checks, in its order; returns (reduction, axis, the segment starts (B, S + 1) as int64)."""
    for name, v in (("lengths", lengths), ("indices", indices), ("offsets", offsets)):
        if v is not None and not isinstance(v, _C.TensorBase):
            raise TypeError(f"segment_reduce(): argument '{name}' must be Tensor, not {type(v).__name__}")
    if not isinstance(data, _C.TensorBase):
        raise TypeError(f"segment_reduce(): argument 'data' (position 1) must be Tensor, not {type(data).__name__}")
    nd = data.ndim
    lo, hi = (-1, 0) if nd == 0 else (-nd, nd - 1)
    if not lo <= axis <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {axis})")
    axis = axis % nd if nd else 0
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if _dtype_name(data) not in ("float32", "float64", "float16", "bfloat16"):
        raise NotImplementedError(f'"_segment_reduce_cpu" not implemented for \'{_scalar_name(data)}\'')
    what, seg = ("offsets", offsets) if offsets is not None else ("lengths", lengths)
    if nd < seg.ndim:
        raise RuntimeError(f"Expected data.dim() >= {what}_value.dim() to be true, but got false.")
    if axis != seg.ndim - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of {what} but got {axis}.")
    if _dtype_name(seg) not in _INTS:
        raise NotImplementedError(f'"_segment_reduce_{what}_cpu_kernel1" not implemented for '
                                  f"'{_scalar_name(seg)}'")
    if tuple(seg.shape[:-1]) != tuple(data.shape[:axis]):
        # PyTorch reads past such a tensor; refused here
        raise RuntimeError(f"segment_reduce(): {what} of shape {tuple(seg.shape)} does not match data of shape "
                           f"{tuple(data.shape)}: its dimensions before the last must be data's before axis {axis}")
    batch = math.prod(data.shape[:axis])
    seg = seg.to(device=data.device).long().reshape(batch, seg.shape[-1])
    if seg._device == "meta":  # no values to check
        unsafe = True
    if offsets is not None:
        if not unsafe and seg.shape[1] and bool((seg[:, 1:] < seg[:, :-1]).any()):
            raise RuntimeError("Expected segment_length >= 0 to be true, but got false.")
        return _REDUCES[reduce], axis, seg
    if not unsafe:
        if seg.numel() and int(seg.min()) < 0:
            raise RuntimeError("lengths contains negative value!")
        if not bool((seg.sum(-1) == data.shape[axis]).all()):
            raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                               "data.size(lengths.dim()-1) when !unsafe.")
    elif seg._device != "meta" and seg.numel() and int(seg.min()) < 0:
        raise RuntimeError("Expected segment_length >= 0 to be true, but got false.")
    return _REDUCES[reduce], axis, cat([zeros(batch, 1, dtype=seg.dtype, device=seg.device), seg.cumsum(1)], 1)


class _SegmentReduce(Function):
    """data (B, N, K) -> (B, S, K), the segment of each position given by ids (B, N, K): S is the dropped extra
    segment of positions outside every segment."""

    @staticmethod
    def forward(ctx, data, ids, nseg, reduction, initial):
        with no_grad():
            b, _, k = data.shape
            shape = (b, nseg + 1, k)
            counts = zeros(shape, dtype=data.dtype, device=data.device).scatter_add(1, ids, _ones_like(data))
            if reduction in ("sum", "mean"):
                out = full(shape, 0 if initial is None else initial, dtype=data.dtype, device=data.device)
                out = out.scatter_add(1, ids, data)
                if reduction == "mean":  # (initial + sum) / length; an empty segment: initial, or NaN without it
                    empty = full((), math.nan if initial is None else initial, dtype=data.dtype, device=data.device)
                    out = where(counts > 0, out / where(counts > 0, counts, 1), empty)
            else:
                start = {"max": -math.inf, "min": math.inf, "prod": 1}[reduction] if initial is None else initial
                out = full(shape, start, dtype=data.dtype, device=data.device)
                with np.errstate(invalid="ignore"):  # NaN propagates, as in PyTorch's kernel
                    out = out.scatter_reduce(1, ids, data, {"max": "amax", "min": "amin"}.get(reduction, reduction))
        if isinstance(ctx, _SegmentReduce):  # a node (grad recorded), not the no-op ctx
            ctx.meta = (reduction, initial)
            ctx.save_for_backward(data, ids, out, counts)
        return out[:, :nseg]

    @staticmethod
    def backward(ctx, g):
        data, ids, out, counts = ctx._unpacked
        reduction, initial = ctx.meta
        with no_grad():
            g = cat([g, zeros(g.shape[0], 1, g.shape[2], dtype=g.dtype, device=g.device)], 1)  # the extra segment
            if reduction == "sum":
                grad = g.gather(1, ids)
            elif reduction == "mean":
                grad = (g / where(counts > 0, counts, 1)).gather(1, ids)
            elif reduction in ("max", "min"):
                # every element equal to the result (or NaN) takes the gradient; a positive one is shared by them
                hit = (data == out.gather(1, ids)) | data.isnan()
                n = zeros(out.shape, dtype=data.dtype, device=data.device).scatter_add(1, ids, hit.to(data.dtype))
                share = where((g > 0) & (n >= 2), g / where(n > 0, n, 1), g)
                grad = where(hit, share.gather(1, ids), 0)
            else:
                grad = _prod_grad(data, ids, out, g, initial)
        return grad, None, None, None, None

    def name(self):
        return "SegmentReduceBackward0"


def _ones_like(t):
    return full(tuple(t.shape), 1, dtype=t.dtype, device=t.device)


def _prod_grad(data, ids, out, g, initial):
    """PyTorch's: g * out / x, and for a zero or NaN x the product of the segment's other elements (and initial)."""
    special = (data == 0) | data.isnan()
    shape, dt, dev = out.shape, data.dtype, data.device
    others = full(shape, 1 if initial is None else initial, dtype=dt, device=dev)
    others = others.scatter_reduce(1, ids, where(special, 1, data), "prod")  # the product of the ordinary ones
    n_zero = zeros(shape, dtype=dt, device=dev).scatter_add(1, ids, (data == 0).to(dt)).gather(1, ids)
    n_nan = zeros(shape, dtype=dt, device=dev).scatter_add(1, ids, data.isnan().to(dt)).gather(1, ids)
    n_zero, n_nan = n_zero - (data == 0).to(dt), n_nan - data.isnan().to(dt)  # the other elements'
    others = others.gather(1, ids)
    exclusive = where(n_nan > 0, math.nan, where(n_zero > 0, others * 0, others))
    gg = g.gather(1, ids)
    return where(special, gg * exclusive, gg * out.gather(1, ids) / data)


def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """Reduce (sum, mean, max, min, prod) the consecutive segments of `data` along `axis`: lengths (..., S) gives
    their sizes, or offsets (..., S + 1) their bounds; lengths' / offsets' dimensions before the last are data's
    before axis. An empty segment gives `initial`, else 0 (sum), NaN (mean), -inf (max), inf (min), 1 (prod);
    `initial` also takes part in every segment's reduction. unsafe=True skips the check that lengths cover the
    axis (not the others). Result: data's shape with axis of size S."""
    reduction, axis, starts = _check(data, reduce, lengths, indices, offsets, axis, unsafe)
    shape = tuple(data.shape)
    b, n, k = math.prod(shape[:axis]), shape[axis] if shape else 1, math.prod(shape[axis + 1:])
    nseg = starts.shape[1] - 1
    pos = arange(n, device=data.device).reshape(1, n).expand(b, n).contiguous()
    if pos.numel():  # (gm.searchsorted refuses no values)
        ids = searchsorted(starts, pos, right=True) - 1
        ids = where((ids < 0) | (ids >= nseg) | (pos >= starts[:, -1:]), nseg, ids)  # outside every segment
    else:
        ids = pos
    ids = ids.reshape(b, n, 1).expand(b, n, k).contiguous()
    out = _SegmentReduce.apply(data.reshape(b, n, k), ids, nseg, reduction, initial)
    return out.reshape(shape[:axis] + (nseg,) + shape[axis + 1:])
