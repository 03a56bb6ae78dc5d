"""Pooling and resizing, with PyTorch's names and signatures: max_pool2d, avg_pool2d, adaptive_avg_pool2d,
global_avg_pool2d, global_max_pool2d, interpolate.

Each op is an autograd Function over the C ops in csrc/ops_pool.c, called through `apply` only when a gradient is
needed. The C side validates shapes (the same checks on every device, meta included); here arguments are
normalised the way PyTorch does (an int means the same value for both spatial dims, stride=None means the kernel
size). What each backward keeps is chosen for memory:
  max_pool2d      after a relu whose output nothing else keeps: int8 window taps of the argmax, and the relu
                  keeps a bit mask instead of its output (_core/activation.py keep_relu_mask); else the input
                  when it is kept for backward anyway (an activation some op saved, or an input batch): nothing of
                  its own, backward finds each argmax again; otherwise the int64 argmax indices (not the input).
                  An inference forward allocates no indices at all
  avg_pool2d      nothing but sizes; adaptive_avg_pool2d and interpolate likewise
  global pooling  the average's gradient is a broadcast view (no input-sized gradient is allocated); the max's
                  gradient goes through the saved (N, C) indices
"""
import math
import numbers

import numpy as np

from .. import _C
from .._core.functions import DIV
from .._core.autograd import needs_grad as _needs_grad
from ._args import _is_int, _pair, in_float64, integer_input
from ._functional_resample import resample
from .._core.autograd import Function, as_activation
from .._core.activation import keep_relu_mask
from .._core.creation import tensor as _tensor
from .._core.dtype import int64 as _int64, uint8 as _uint8

__all__ = ["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "global_avg_pool2d", "global_max_pool2d",
           "interpolate"]


# ---- argument normalisation --------------------------------------------------------------------------------------
def _stride(stride, kernel, op):
    # PyTorch: stride None (or an empty list, its C++ default) means "same as the kernel": non-overlapping windows.
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        return kernel
    return _pair(stride, "stride", op)


def _check_input(x, op):
    if not isinstance(x, _C.TensorBase):
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")


def _check_spatial(x, op):
    """Ops that read H and W here in Python need a 3-D or 4-D input first (C checks the rest)."""
    _check_input(x, op)
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: expected an input of 3 dimensions (C, H, W) or 4 (N, C, H, W), got shape "
                         f"{tuple(x.shape)}")


# ---- max_pool2d --------------------------------------------------------------------------------------------------
# Categories of an input that stays alive through backward whatever max pooling saves: one an op saved for its own
# backward (freed only after the pool's backward, which runs first), or the batch a DataLoader made.
_KEPT = ("activation", "input")
_INT64, _INT8 = 4, 7  # dtype codes (python/gpumemnet/_core/dtype.py)


class _MaxPool2d(Function):
    @staticmethod
    def forward(ctx, x, kernel, stride, padding, dilation, ceil_mode, return_indices):
        ctx.in_shape = x.shape
        ctx.window = (kernel, stride, padding, dilation)  # lets the CUDA backward gather instead of scatter
        ctx.ceil_mode = ceil_mode
        if not return_indices and kernel[0] * kernel[1] <= 127 and keep_relu_mask(x):
            # x is a relu's output that nothing else keeps: the relu now keeps a bit mask, and the argmax is kept
            # as its tap in the window (1 byte per output), so x is freed when the caller drops it (a UNet's
            # skip, at its concatenation) instead of living until backward.
            out, taps = _C.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, 2)
            ctx.save_for_backward(as_activation(taps))
            return out
        if not return_indices and x._category in _KEPT:
            # Saving a tensor that stays alive anyway costs nothing; the indices would cost 8 bytes per output.
            ctx.save_for_backward(x)
            return _C.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, False)
        out, idx = _C.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, True)
        ctx.save_for_backward(as_activation(idx))
        if return_indices:
            ctx.mark_non_differentiable(1)
            return out, idx
        return out

    @staticmethod
    def backward(ctx, g, *unused):
        saved, = ctx._unpacked
        # By what was saved, not by a flag: under checkpointing the recomputed forward decides again, and its
        # input's category may differ from the first run's.
        if saved._dtype in (_INT64, _INT8):  # int8: window taps, read with the window
            return (_C.max_pool2d_backward(g, saved, ctx.in_shape, *ctx.window),) + (None,) * 6
        return (_C.max_pool2d_backward_input(g, saved, *ctx.window, ctx.ceil_mode),) + (None,) * 6


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over (dilated) windows of an (N, C, H, W) or (C, H, W) input. Padding counts as -inf and must be at most
    half the kernel; with ceil_mode the last window may hang over the input's end but must start inside it or in
    the left padding. With return_indices, also returns int64 indices (flat positions h*W + w in each plane, -1
    for a window that covers no element). Under no_grad only the output is allocated."""
    op = "max_pool2d"
    _check_input(input, op)
    if integer_input(input):
        return in_float64(lambda x: max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices),
                          input)
    k = _pair(kernel_size, "kernel_size", op)
    args = (k, _stride(stride, k, op), _pair(padding, "padding", op), _pair(dilation, "dilation", op),
            bool(ceil_mode))
    if _needs_grad(input):
        return _MaxPool2d.apply(input, *args, bool(return_indices))
    return _C.max_pool2d(input, *args, bool(return_indices))


# ---- avg_pool2d --------------------------------------------------------------------------------------------------
class _AvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
        ctx.in_shape = x.shape
        ctx.args = (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
        return _C.avg_pool2d(x, *ctx.args)

    @staticmethod
    def backward(ctx, g):
        return (_C.avg_pool2d_backward(g, ctx.in_shape, *ctx.args),) + (None,) * 6


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over windows of an (N, C, H, W) or (C, H, W) input. The divisor is divisor_override when given, else
    the window's size including the zero padding (count_include_pad=True) or only the elements inside the input.
    Padding must be at most half the kernel."""
    op = "avg_pool2d"
    _check_input(input, op)
    if integer_input(input):
        return in_float64(lambda x: avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                               divisor_override), input)
    if divisor_override is not None and not _is_int(divisor_override):
        raise TypeError(f"{op}: divisor_override must be None or an int, got {divisor_override!r}")
    if divisor_override == 0:
        raise RuntimeError(f"{op}: divisor must be not zero (divisor_override=0)")  # PyTorch's type and words
    if divisor_override is not None and divisor_override < 0:
        raise ValueError(f"{op}: divisor_override must be a positive int, got {divisor_override}")
    k = _pair(kernel_size, "kernel_size", op)
    args = (k, _stride(stride, k, op), _pair(padding, "padding", op), bool(ceil_mode), bool(count_include_pad),
            None if divisor_override is None else int(divisor_override))
    if _needs_grad(input):
        return _AvgPool2d.apply(input, *args)
    return _C.avg_pool2d(input, *args)


# ---- adaptive_avg_pool2d -----------------------------------------------------------------------------------------
def _mean_grad_view(g, in_shape):
    """The gradient of a mean over H and W: g / (H*W) broadcast over each plane as a stride-0 view, so backward
    allocates an (N, C) tensor instead of an input-sized one. g has the input's leading dims, with or without
    trailing (1, 1)."""
    g = _C.binary(DIV, g, float(in_shape[-2] * in_shape[-1]))
    while g.ndim < len(in_shape):
        g = g._unsqueeze(g.ndim)
    return g._expand(tuple(in_shape))


class _AdaptiveAvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, output_size):
        ctx.in_shape = x.shape
        ctx.global_mean = tuple(output_size) == (1, 1)
        return _C.adaptive_avg_pool2d(x, output_size)

    @staticmethod
    def backward(ctx, g):
        if ctx.global_mean:
            return _mean_grad_view(g, ctx.in_shape), None
        return _C.adaptive_avg_pool2d_backward(g, ctx.in_shape), None


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed output size (an int, or a pair whose None entries keep the input's size).
    Output cell i covers input rows [floor(i*H/OH), ceil((i+1)*H/OH)), and likewise for columns, as in PyTorch."""
    op = "adaptive_avg_pool2d"
    _check_spatial(input, op)
    if _is_int(output_size):
        size = (int(output_size), int(output_size))
    elif isinstance(output_size, (tuple, list)) and len(output_size) == 2 and \
            all(v is None or _is_int(v) for v in output_size):
        size = tuple(input.shape[-2 + i] if v is None else int(v) for i, v in enumerate(output_size))
    else:  # a sequence of another length: PyTorch's RuntimeError; anything else a TypeError
        raise (RuntimeError if isinstance(output_size, (tuple, list)) else TypeError)(
            f"{op}: output_size must be an int or a pair of ints (None keeps that size), got {output_size!r}")
    if size[0] < 0 or size[1] < 0:
        raise _C.ArgumentError(f"{op}: output_size must be non-negative, got {output_size!r} for an input of shape "
                         f"{tuple(input.shape)}")
    if _needs_grad(input):
        return _AdaptiveAvgPool2d.apply(input, size)
    return _C.adaptive_avg_pool2d(input, size)


# ---- global pooling ----------------------------------------------------------------------------------------------
def _drop_hw(t):
    return t._view(tuple(t.shape[:-2]))  # (..., 1, 1) -> (...): contiguous output, always a view


class _GlobalAvgPool2d(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.in_shape = x.shape
        return _drop_hw(_C.adaptive_avg_pool2d(x, (1, 1)))

    @staticmethod
    def backward(ctx, g):
        return _mean_grad_view(g, ctx.in_shape)


def _global_max(x, with_indices):
    h, w = x.shape[-2], x.shape[-1]
    return _C.max_pool2d(x, (h, w), (h, w), (0, 0), (1, 1), False, with_indices)


class _GlobalMaxPool2d(Function):
    @staticmethod
    def forward(ctx, x):
        out, idx = _global_max(x, True)
        ctx.save_for_backward(as_activation(idx))
        ctx.in_shape = x.shape
        return _drop_hw(out)

    @staticmethod
    def backward(ctx, g):
        idx, = ctx._unpacked
        return _C.max_pool2d_backward(g._unsqueeze(g.ndim)._unsqueeze(g.ndim + 1), idx, ctx.in_shape)


def global_avg_pool2d(input):
    """Mean of each channel over H and W: (N, C, H, W) -> (N, C), or (C, H, W) -> (C,).

    Equal to adaptive_avg_pool2d(input, 1).flatten(1). This is the "global average pooling" head of Network in
    Network: in place of flattening a large feature map into a huge Linear layer (seed 000's fc1 held 583.7M of
    the model's 953.9M parameters), pool each channel to one number and classify from C features. Its backward
    allocates only an (N, C) tensor: the input's gradient is a broadcast view of it."""
    op = "global_avg_pool2d"
    _check_spatial(input, op)
    if _needs_grad(input):
        return _GlobalAvgPool2d.apply(input)
    return _drop_hw(_C.adaptive_avg_pool2d(input, (1, 1)))


def global_max_pool2d(input):
    """Max of each channel over H and W: (N, C, H, W) -> (N, C), or (C, H, W) -> (C,).

    Equal to adaptive max pooling to 1x1, flattened: max_pool2d(input, (H, W)).flatten(1). The alternative to
    global_avg_pool2d when a feature's strongest response matters more than its mean. The gradient goes to the
    first maximal element of each plane (row-major order); backward keeps only (N, C) int64 indices."""
    op = "global_max_pool2d"
    _check_spatial(input, op)
    if _needs_grad(input):
        return _GlobalMaxPool2d.apply(input)
    return _drop_hw(_global_max(input, False))


# ---- interpolate -------------------------------------------------------------------------------------------------
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_PYTORCH_ONLY = ("lanczos",)
_NEEDS_DIM = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}  # the input rank each linear mode takes


class _Interpolate(Function):
    @staticmethod
    def forward(ctx, x, size, mode, align_corners, scales):
        ctx.in_shape = x.shape
        ctx.args = (mode, align_corners, scales)
        return _C.interpolate(x, size, mode, align_corners, scales)

    @staticmethod
    def backward(ctx, g):
        return (_C.interpolate_backward(g, ctx.in_shape, *ctx.args),) + (None,) * 4


def _resize(x, size, mode, align_corners, scales):
    if _needs_grad(x):
        return _Interpolate.apply(x, size, mode, align_corners, scales)
    return _C.interpolate(x, size, mode, align_corners, scales)


def _nearest_index(n_in, n_out, scale_factor, exact, x):
    """PyTorch's nearest source indices along one dim of a 3-D resize, computed as its kernel does in the input's
    precision (float64 for float64, else float32): floorf(scale * dst), or for nearest-exact
    floorf(scale * (dst + 0.5) - 0.5 + 0.5), with scale = 1/scale_factor or in/out; at most n_in - 1."""
    ft = np.float64 if x.dtype.itemsize == 8 else np.float32
    scale = ft(1.0 / scale_factor) if scale_factor else ft(n_in) / ft(n_out)
    dst = np.arange(n_out).astype(ft)
    pos = (scale * (dst + ft(0.5)) - ft(0.5)) + ft(0.5) if exact else scale * dst
    src = np.minimum(np.floor(pos.astype(np.float32)).astype(np.int64), n_in - 1)  # its floorf rounds to float
    return _tensor(src, dtype=_int64, device=x.device)


def _resize_5d(x, out, mode, align_corners, scales):
    """(N, C, D, H, W) resized. trilinear: two 2-D bilinear resizes, (H, W) with depth folded into the channels,
    then depth over the (N, C, D, oH*oW) view, whose second dim keeps its size (source = destination, weight 0 on
    the next); trilinear weights are products of per-dim ones, so each output is the sum PyTorch's 3-D kernel
    computes. 'area' is adaptive average pooling, separable in the same way. The nearest modes gather along each
    dim in turn (index_select)."""
    n, c, d, h, w = x.shape
    plane = out[1] * out[2]
    if mode == "area":
        y = adaptive_avg_pool2d(x.reshape(n, c * d, h, w), out[1:]).reshape(n, c, d, plane)
        return adaptive_avg_pool2d(y, (out[0], plane)).reshape((n, c) + tuple(out))
    if mode != "trilinear":  # nearest, nearest-exact: one gather per dim (no doubling shortcut in 3-D)
        y = x
        for i in range(3):
            y = y.index_select(2 + i, _nearest_index(x.shape[2 + i], out[i], None if scales is None else
                                                     scales[i], mode == "nearest-exact", x))
        return y
    mode = "bilinear"
    y = _resize(x.reshape(n, c * d, h, w), out[1:], mode, align_corners, None if scales is None else scales[1:])
    y = _resize(y.reshape(n, c, d, plane), (out[0], plane), mode, align_corners,
                None if scales is None else (scales[0], 1.0))
    return y.reshape((n, c) + tuple(out))


def _per_dim(value, dim, name, check):
    """A number or a sequence of `dim` numbers -> a list of `dim` values."""
    if isinstance(value, (tuple, list)):
        if len(value) != dim:
            raise ValueError(f"interpolate: {name} must have one entry per spatial dimension ({dim}), got {value!r}")
        vals = list(value)
    else:
        vals = [value] * dim
    for v in vals:
        if not check(v):
            raise TypeError(f"interpolate: {name} must be {'an int' if name == 'size' else 'a number'} or a "
                            f"sequence of {dim}, got {value!r}")
    return vals


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, H, W) images, (N, C, D, H, W) volumes, or (N, C, L) signals with the nearest modes, as
    PyTorch's F.interpolate.

    Exactly one of size (int or one per spatial dim) and scale_factor (number or one per dim; the output is
    floor(in * scale_factor)) is given. mode: "nearest" (source index floor(dst * in/out), or floor(dst /
    scale_factor) when scale_factor is given and recompute_scale_factor is not True; on 4-D inputs an unchanged
    size copies and a doubled one repeats each pixel whatever the factor, as PyTorch's 2-D kernel does),
    "nearest-exact" (pixel centres), "bilinear" (align_corners=True maps the corner pixels onto each other;
    False, the default, maps pixel areas and clamps source coordinates below 0 to 0), "trilinear" (its 5-D form)
    and "area" (adaptive average pooling, 4-D and 5-D). 5-D inputs resize as two 2-D resizes (_resize_5d). The
    source pixels are PyTorch's (checked against PyTorch 2.15); the backward is the exact adjoint of the forward
    (PyTorch's 1-D nearest backward is not, when a scale factor is given, nor its 3-D one where a scale factor
    other than 2 doubles a size: its backward then pairs the outputs as if the factor were 2)."""
    op = "interpolate"
    _check_input(input, op)
    if input.dtype == _uint8 and mode in ("bilinear", "bicubic"):
        # PyTorch resizes uint8 images itself (torchvision's v2 resize hands them over): computed here in float32,
        # rounded to the nearest integer and clamped, as its uint8 kernels round (a cast alone would truncate)
        y = interpolate(input.float(), size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
        return y.round().clamp(0, 255).to(_uint8)
    if mode not in _MODES:
        extra = " (a PyTorch mode gpumemnet does not implement)" if mode in _PYTORCH_ONLY else ""
        raise ValueError(f"{op}: mode {mode!r} is not supported{extra}; expected one of {', '.join(_MODES)}")
    if input.ndim not in (3, 4, 5):
        raise ValueError(f"{op}: expected a 4-D input (N, C, H, W), a 5-D one (N, C, D, H, W) or a 3-D one "
                         f"(N, C, L), got shape {tuple(input.shape)}")
    if antialias and not (mode in ("bilinear", "bicubic") and input.ndim == 4):
        raise ValueError(f"{op}: Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D "
                         f"tensor as input (got mode {mode!r} and a {input.ndim}-D input)")
    if mode in _NEEDS_DIM:
        align_corners = bool(align_corners)  # PyTorch's default: False
    elif align_corners is not None:
        raise ValueError(f"{op}: align_corners option can only be set with the interpolating modes: linear | "
                         f"bilinear | bicubic | trilinear (got mode {mode!r})")
    else:
        align_corners = False
    dim = input.ndim - 2
    spatial = tuple(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: " + ("only one of size or scale_factor should be defined" if size is not None
                                       else "either size or scale_factor should be defined"))
    scales = None
    if size is not None:
        if recompute_scale_factor:
            raise ValueError(f"{op}: recompute_scale_factor is not meaningful with an explicit size")
        out = tuple(int(v) for v in _per_dim(size, dim, "size", _is_int))
    else:
        factors = [float(v) for v in _per_dim(scale_factor, dim, "scale_factor",
                                              lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool))]
        if any(not (f > 0) or math.isinf(f) for f in factors):
            raise ValueError(f"{op}: scale_factor must be positive and finite, got {scale_factor!r}")
        out = tuple(math.floor(float(n) * f) for n, f in zip(spatial, factors))
        if not recompute_scale_factor:
            scales = tuple(factors)  # PyTorch uses the given factor, not out/in, for the source coordinates
    if mode in _NEEDS_DIM and input.ndim != _NEEDS_DIM[mode]:
        raise NotImplementedError(f"{op}: got a {input.ndim}-D input of shape {tuple(input.shape)}, but {mode} "
                                  f"mode needs a {_NEEDS_DIM[mode]}-D input")
    if any(o <= 0 for o in out):
        raise _C.ArgumentError(f"{op}: the output size {out} must be positive (input of shape {tuple(input.shape)}, "
                         f"size={size!r}, scale_factor={scale_factor!r})")
    if dim == 3:
        return _resize_5d(input, out, mode, align_corners, scales)
    if mode == "area":  # adaptive average pooling; of a signal (N, C, L), as an image one pixel high
        if dim == 1:
            return adaptive_avg_pool2d(input.unsqueeze(2), (1, out[0])).squeeze(2)
        return adaptive_avg_pool2d(input, out)
    if mode in ("linear", "bicubic") or antialias:
        return resample(input, out, mode, align_corners, scales, antialias)
    if not input.dtype.is_floating_point and mode in ("nearest", "nearest-exact"):
        # the kernel reads floats: nearest picks pixels, so float64 (exact for every integer up to 2^53) picks the
        # same ones (torchvision resizes uint8 masks this way)
        return _C.interpolate(input.double(), out, mode, align_corners, scales).to(input.dtype)
    if _needs_grad(input):
        return _Interpolate.apply(input, out, mode, align_corners, scales)
    return _C.interpolate(input, out, mode, align_corners, scales)
