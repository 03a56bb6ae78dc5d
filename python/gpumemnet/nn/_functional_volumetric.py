"""3-D convolutions and pooling (conv3d, conv_transpose3d, max_pool3d, avg_pool3d, adaptive pools), composed from
the 2-D ops; nn.functional imports __all__.

conv3d stacks the kD depth taps of the (depth-padded) input along the channels and folds the output depth into
the batch: one conv2d over (N*oD, kD*C, H, W) with the weight (O, kD*C/groups, kH, kW) - the fast 2-D kernels,
their workspace bound and the meta device's estimate, with autograd by composition. The stacked input is kD/sD
times the input (what conv2d saves for the weight's gradient, as im2col over depth would).
conv_transpose3d runs conv_transpose2d over the input's depth slices (depth folded into the batch) with the kD
taps as extra output channels, and adds tap kd of slice d into output depth d*sD + kd*dD - pD (index_add).
The pools are separable: the 2-D pool over (H, W) with depth as the channels, then the same pool over depth
(a (k, 1) window on the (N*C, 1, D, oH*oW) view). Max of maxima, and a mean of means whose divisor is the
product of the per-dim divisors, which is what PyTorch's 3-D windows count. Indices are PyTorch's flat
d*H*W + h*W + w, the first maximum in (d, h, w) order."""
from .. import _C
from .._core import autocast as _amp
from .._core.activation import _check_tensor
from .._core.creation import stack as _stack
from .._core.creation import tensor as _tensor
from .._core.dtype import int64 as _int64
from ._args import _is_int
from ._functional_conv import conv2d, conv_transpose2d
from ._functional_layers import pad as _pad
from ._functional_pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from ._functional_pool1d import adaptive_max_pool2d

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d"]


def _triple(value, name, op):
    """An int or a sequence of 1 or 3 ints -> (d, h, w), as PyTorch's _triple / expand_param_if_needed."""
    if _is_int(value):
        return (int(value),) * 3
    if isinstance(value, (tuple, list)) and len(value) in (1, 3) and all(_is_int(v) for v in value):
        return tuple(int(v) for v in value) * (3 // len(value))
    raise TypeError(f"{op}: {name} must be an int or a tuple of 3 ints, got {value!r}")


def _check_volume(input, op, weight=None):
    _check_tensor(input, op)
    if weight is not None:
        _check_tensor(weight, op)
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{op}: expected a 4-D (C, D, H, W) or 5-D (N, C, D, H, W) input, got shape "
                           f"{tuple(input.shape)}")
    if weight is not None and weight.ndim != 5:
        raise RuntimeError(f"{op}: expected a 5-D weight, got shape {tuple(weight.shape)}")
    unbatched = input.ndim == 4
    return (input.unsqueeze(0) if unbatched else input), unbatched


def _conv_args(op, bias, stride, dilation, groups):
    if bias is not None and not isinstance(bias, _C.TensorBase):
        raise TypeError(f"{op}: bias must be a Tensor or None, got {type(bias).__name__}")
    stride, dilation = _triple(stride, "stride", op), _triple(dilation, "dilation", op)
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"{op}: stride must be positive, got {stride}")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"{op}: dilation must be positive, got {dilation}")
    if not _is_int(groups) or groups <= 0:
        raise RuntimeError(f"{op}: groups must be a positive int, got {groups!r}")
    return stride, dilation, int(groups)


# ---- conv3d ------------------------------------------------------------------------------------------------------
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution (cross-correlation) of an (N, C, D, H, W) or (C, D, H, W) input with an
    (out_channels, C/groups, kD, kH, kW) weight. padding: an int, a triple, 'valid' or 'same' (stride 1 only; an
    odd total goes to the back/bottom/right, as in PyTorch). Runs as one conv2d (see the module docstring)."""
    op = "conv3d"
    x, unbatched = _check_volume(input, op, weight)
    stride, dilation, groups = _conv_args(op, bias, stride, dilation, groups)
    n, c, d = x.shape[0], x.shape[1], x.shape[2]
    o, cg, kd = weight.shape[0], weight.shape[1], weight.shape[2]
    if c != cg * groups:
        raise RuntimeError(f"{op}: weight of shape {tuple(weight.shape)} with groups={groups} expects input with "
                           f"{cg * groups} channels, but got input of shape {tuple(input.shape)} with {c} channels")
    if o == 0 or o % groups:
        raise RuntimeError(f"{op}: out_channels {o} (weight of shape {tuple(weight.shape)}) must be positive and "
                           f"divisible by groups={groups}")
    if bias is not None and tuple(bias.shape) != (o,):
        raise RuntimeError(f"{op}: bias of shape {tuple(bias.shape)} does not match {o} output channels")
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise _C.ArgumentError(f"{op}: invalid padding string {padding!r}; expected 'same' or 'valid'")
        if padding == "same" and stride != (1, 1, 1):
            raise _C.ArgumentError(f"{op}: padding='same' is not supported for strided convolutions (stride "
                                   f"{stride})")
        total = dilation[0] * (kd - 1) if padding == "same" else 0
        depth_pad = (total // 2, total - total // 2)
        hw_pad = padding
        p = tuple(dilation[i] * (weight.shape[2 + i] - 1) / 2 if padding == "same" else 0 for i in range(3))
    else:
        p = _triple(padding, "padding", op)
        if any(v < 0 for v in p):
            raise RuntimeError(f"{op}: padding must be non-negative, got {p}")
        depth_pad, hw_pad = (p[0], p[0]), p[1:]
    for i in range(3):
        size = x.shape[2 + i] + int(2 * p[i])
        span = dilation[i] * (weight.shape[2 + i] - 1) + 1
        if span > size:
            raise RuntimeError(f"{op}: the kernel {tuple(weight.shape[2:])} with dilation {dilation} spans {span} "
                               f"in dim {i}, larger than the padded input size {size} (input of shape "
                               f"{tuple(input.shape)}, padding {padding!r})")
    if _amp._state.enabled:
        x, weight, bias = _amp.lower(x, weight, bias)
    if depth_pad != (0, 0):
        x = _pad(x, (0, 0, 0, 0) + depth_pad)
    od = (d + sum(depth_pad) - dilation[0] * (kd - 1) - 1) // stride[0] + 1
    # (N, D, C, H, W) view; tap t reads depths t*dD + j*sD for output depth j
    xt = x.permute(0, 2, 1, 3, 4)
    stop = (od - 1) * stride[0] + 1
    taps = [xt[:, t * dilation[0]:t * dilation[0] + stop:stride[0]] for t in range(kd)]
    cols = _stack(taps, 2)  # (N, oD, kD, C, H, W): the one copy
    h, w = x.shape[3], x.shape[4]
    if groups > 1:  # channel order (group, tap, channel in group), as conv2d's groups read them
        cols = cols.reshape(n, od, kd, groups, c // groups, h, w).permute(0, 1, 3, 2, 4, 5, 6)
    cols = cols.reshape(n * od, kd * c, h, w)
    w2 = weight.permute(0, 2, 1, 3, 4).reshape(o, kd * cg, weight.shape[3], weight.shape[4])
    out = conv2d(cols, w2, bias, stride[1:], hw_pad, dilation[1:], groups)
    out = out.reshape(n, od, o, out.shape[2], out.shape[3]).permute(0, 2, 1, 3, 4).contiguous()
    return out.squeeze(0) if unbatched else out


# ---- conv_transpose3d --------------------------------------------------------------------------------------------
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 3-D convolution (the gradient of conv3d with respect to its input) of an (N, C_in, D, H, W)
    or (C_in, D, H, W) input with a (C_in, out_channels/groups, kD, kH, kW) weight. The output depth is
    (D - 1)*stride - 2*padding + dilation*(kD - 1) + output_padding + 1 (likewise H and W); output_padding must
    be smaller than stride or dilation."""
    op = "conv_transpose3d"
    x, unbatched = _check_volume(input, op, weight)
    stride, dilation, groups = _conv_args(op, bias, stride, dilation, groups)
    if isinstance(padding, str):
        raise TypeError(f"{op}: padding must be an int or a tuple of 3 ints, got {padding!r}")
    p, op_ = _triple(padding, "padding", op), _triple(output_padding, "output_padding", op)
    n, c, d = x.shape[0], x.shape[1], x.shape[2]
    og, kd = weight.shape[1], weight.shape[2]
    if c != weight.shape[0] or c % groups:
        raise RuntimeError(f"{op}: weight of shape {tuple(weight.shape)} expects input with {weight.shape[0]} "
                           f"channels (divisible by groups={groups}), but got input of shape {tuple(input.shape)}")
    o = og * groups
    if bias is not None and tuple(bias.shape) != (o,):
        raise RuntimeError(f"{op}: bias of shape {tuple(bias.shape)} does not match {o} output channels")
    if any(v < 0 for v in p + op_):
        raise RuntimeError(f"{op}: padding {p} and output_padding {op_} must be non-negative")
    for i in range(3):
        if op_[i] >= max(stride[i], dilation[i]):
            raise RuntimeError(f"{op}: output padding must be smaller than either stride or dilation, got "
                               f"output_padding {op_}, stride {stride}, dilation {dilation}")
    sizes = [(x.shape[2 + i] - 1) * stride[i] - 2 * p[i] + dilation[i] * (weight.shape[2 + i] - 1) + op_[i] + 1
             for i in range(3)]
    if any(s <= 0 for s in sizes):
        raise RuntimeError(f"{op}: the output size {tuple(sizes)} must be positive (input of shape "
                           f"{tuple(input.shape)}, padding {p})")
    if _amp._state.enabled:
        x, weight, bias = _amp.lower(x, weight, bias)
    h, w = x.shape[3], x.shape[4]
    xf = x.permute(0, 2, 1, 3, 4).reshape(n * d, c, h, w)
    # output channel order (group, tap, channel in group), as conv_transpose2d's groups write them
    w2 = weight.permute(0, 2, 1, 3, 4).reshape(c, kd * og, weight.shape[3], weight.shape[4])
    y = conv_transpose2d(xf, w2, None, stride[1:], p[1:], op_[1:], groups, dilation[1:])
    oh, ow = y.shape[2], y.shape[3]
    y = y.reshape(n, d, groups, kd, og, oh, ow).permute(0, 3, 1, 2, 4, 5, 6).reshape(n, kd * d, o, oh, ow)
    full = (d - 1) * stride[0] + dilation[0] * (kd - 1) + 1 + op_[0]
    idx = [j * stride[0] + t * dilation[0] for t in range(kd) for j in range(d)]
    index = _tensor(idx, dtype=_int64, device=x.device)
    out = y.new_zeros((n, full, o, oh, ow)).index_add(1, index, y)
    out = out[:, p[0]:p[0] + sizes[0]].permute(0, 2, 1, 3, 4)
    out = (out + bias.reshape(1, o, 1, 1, 1)) if bias is not None else out.contiguous()
    return out.squeeze(0) if unbatched else out


# ---- pooling -----------------------------------------------------------------------------------------------------
def _pool_stride(stride, kernel, op):
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        return kernel
    return _triple(stride, "stride", op)


def _check_planes(op, x):
    """The pools' inputs: every dim but the batch non-empty, as PyTorch requires."""
    _check_volume(x, op)
    if any(v == 0 for v in x.shape[x.ndim - 4:]):
        raise RuntimeError(f"{op}: expected input to have non-zero size for non-batch dimensions, but input has "
                           f"shape {tuple(x.shape)}")


def _pool_size(size, k, s, p, dil, ceil_mode):
    """PyTorch's pooling output size along one dim: the last window must start inside the input or the left
    padding."""
    out = (size + 2 * p - dil * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _check_pool(op, x, k, s, p, dil=(1, 1, 1), ceil_mode=False):
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{op}: kernel_size must be positive, got {k}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{op}: stride must be positive, got {s}")
    if any(v <= 0 for v in dil):
        raise RuntimeError(f"{op}: dilation must be positive, got {dil}")
    if any(pv < 0 or pv > (dil[i] * (k[i] - 1) + 1) // 2 for i, pv in enumerate(p)):
        raise RuntimeError(f"{op}: pad should be at most half of effective kernel size, got padding {p} for "
                           f"kernel_size {k} and dilation {dil}")
    out = tuple(_pool_size(x.shape[-3 + i], k[i], s[i], p[i], dil[i], ceil_mode) for i in range(3))
    if any(v <= 0 for v in out):
        raise RuntimeError(f"{op}: input of shape {tuple(x.shape)} gives output size {out} with kernel_size {k}, "
                           f"stride {s}, padding {p}, dilation {dil}: output size is too small")


def _planes(x):
    """(N, C, D, H, W) or (C, D, H, W) -> the (N*C, D, H, W) view: depth stands as the 2-D ops' channels."""
    return x.reshape((-1,) + tuple(x.shape[-3:]))


def _depth_view(t):
    """(P, D, oH, oW) -> (P, 1, D, oH*oW): the pool over depth is a 2-D pool with a (k, 1) window."""
    return t.reshape(t.shape[0], 1, t.shape[1], t.shape[2] * t.shape[3])


def _finish(out, x, oh, ow):
    return out.reshape(tuple(x.shape[:-3]) + (out.shape[2], oh, ow))


def _compose_indices(idx_hw, idx_d, x, oh, ow):
    """Flat d*H*W + h*W + w indices from the two stages' indices: idx_d (P, 1, oD, oH*oW) holds d*(oH*oW) + j,
    idx_hw (P, D, oH, oW) the h*W + w of each depth's maximum."""
    cells = oh * ow
    d = idx_d.reshape(idx_d.shape[0], idx_d.shape[2], cells).floor_divide(cells)
    hw = idx_hw.reshape(idx_hw.shape[0], idx_hw.shape[1], cells).gather(1, d)
    return (d * (x.shape[-2] * x.shape[-1]) + hw).reshape(tuple(x.shape[:-3]) + (d.shape[1], oh, ow))


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over (dilated) 3-D windows of an (N, C, D, H, W) or (C, D, H, W) input; padding counts as -inf and must
    be at most half the kernel. return_indices: also the int64 flat positions d*H*W + h*W + w."""
    op = "max_pool3d"
    _check_planes(op, input)
    k = _triple(kernel_size, "kernel_size", op)
    s, p, dil = _pool_stride(stride, k, op), _triple(padding, "padding", op), _triple(dilation, "dilation", op)
    _check_pool(op, input, k, s, p, dil, ceil_mode)
    planes = _planes(input)
    first = max_pool2d(planes, k[1:], s[1:], p[1:], dil[1:], ceil_mode, return_indices)
    out_hw = first[0] if return_indices else first
    oh, ow = out_hw.shape[2], out_hw.shape[3]
    second = max_pool2d(_depth_view(out_hw), (k[0], 1), (s[0], 1), (p[0], 0), (dil[0], 1), ceil_mode,
                        return_indices)
    if not return_indices:
        return _finish(second, input, oh, ow)
    return _finish(second[0], input, oh, ow), _compose_indices(first[1], second[1], input, oh, ow)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over 3-D windows of an (N, C, D, H, W) or (C, D, H, W) input. The divisor is divisor_override when
    given, else the window's size including the zero padding (count_include_pad=True) or only the elements
    inside the input. Padding must be at most half the kernel."""
    op = "avg_pool3d"
    _check_planes(op, input)
    k = _triple(kernel_size, "kernel_size", op)
    s, p = _pool_stride(stride, k, op), _triple(padding, "padding", op)
    if divisor_override is not None and (not _is_int(divisor_override) or divisor_override == 0):
        raise RuntimeError(f"{op}: divisor must be not zero, got divisor_override={divisor_override!r}")
    _check_pool(op, input, k, s, p, ceil_mode=ceil_mode)
    one = None if divisor_override is None else 1  # sums in both stages, divided once at the end
    first = avg_pool2d(_planes(input), k[1:], s[1:], p[1:], ceil_mode, count_include_pad, one)
    oh, ow = first.shape[2], first.shape[3]
    out = avg_pool2d(_depth_view(first), (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode, count_include_pad, one)
    if divisor_override is not None:
        out = out / divisor_override
    return _finish(out, input, oh, ow)


def _output_size(op, input, output_size):
    if _is_int(output_size):
        size = (int(output_size),) * 3
    elif isinstance(output_size, (tuple, list)) and len(output_size) in (1, 3) and \
            all(v is None or _is_int(v) for v in output_size):
        size = tuple(input.shape[-3 + i] if v is None else int(v)
                     for i, v in enumerate(tuple(output_size) * (3 // len(output_size))))
    elif isinstance(output_size, (tuple, list)):
        raise RuntimeError(f"{op}: output_size must be an int or a tuple of 3 (ints or None), got {output_size!r}")
    else:
        raise TypeError(f"{op}: output_size must be an int or a tuple of 3 ints (None keeps that size), got "
                        f"{output_size!r}")
    if any(v < 0 for v in size):
        raise RuntimeError(f"{op}: output_size must be non-negative, got {output_size!r}")
    return size


def _empty_result(input, size):
    """An output size with a 0 in it: an empty result (still in the graph: its gradient is zeros)."""
    return input.flatten(-3)[..., :0].reshape(tuple(input.shape[:-3]) + size)


def adaptive_avg_pool3d(input, output_size):
    """Average pooling to a fixed output size (an int, or a triple whose None entries keep the input's size);
    output cell i covers input [floor(i*D/oD), ceil((i+1)*D/oD)) in each dim, as in PyTorch."""
    op = "adaptive_avg_pool3d"
    _check_planes(op, input)
    size = _output_size(op, input, output_size)
    if 0 in size:
        return _empty_result(input, size)
    first = adaptive_avg_pool2d(_planes(input), size[1:])
    out = adaptive_avg_pool2d(_depth_view(first), (size[0], size[1] * size[2]))
    return _finish(out, input, size[1], size[2])


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max pooling to a fixed output size (an int, or a triple whose None entries keep the input's size); with
    return_indices also the int64 flat positions d*H*W + h*W + w of the maxima."""
    op = "adaptive_max_pool3d"
    _check_planes(op, input)
    size = _output_size(op, input, output_size)
    if 0 in size:
        out = _empty_result(input, size)
        return (out, out.detach().long()) if return_indices else out
    out_hw, idx_hw = adaptive_max_pool2d(_planes(input), size[1:], True)
    out, idx_d = adaptive_max_pool2d(_depth_view(out_hw), (size[0], size[1] * size[2]), True)
    out = _finish(out, input, size[1], size[2])
    if not return_indices:
        return out
    return out, _compose_indices(idx_hw, idx_d, input, size[1], size[2])
