"""conv1d and conv_transpose1d: the 2-D convolutions over a height of 1. The input (N, C, L) is viewed as
(N, C, 1, L) and the weight (O, I, K) as (O, I, 1, K), so the 1-D layers run on the same kernels (and the same
workspace bound, routes and estimates) as the 2-D ones, with no copy; gradients flow back through the views."""
from .. import _C
from ._functional_conv import conv2d, conv_transpose2d


def _single(value, name, op):
    """An int or a one-element sequence -> int."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise TypeError(f"{op}: {name} must be an int or a tuple of 1 int, got {value!r}")
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{op}: {name} must be an int or a tuple of 1 int, got {value!r}")
    return value


def _as_2d(op, input, weight):
    if not isinstance(input, _C.TensorBase) or not isinstance(weight, _C.TensorBase):
        raise TypeError(f"{op}(): input and weight must be Tensors, got {type(input).__name__} and "
                        f"{type(weight).__name__}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape {tuple(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(f"{op}: expected a 3-D weight, got shape {tuple(weight.shape)}")
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    return x.unsqueeze(2), weight.unsqueeze(2), unbatched


def _check_channels(op, input, weight, expected, groups):
    """The channel check conv2d would make, in the 1-D shapes the caller gave (not the (N, C, 1, L) views)."""
    c = input.shape[-2]
    if isinstance(groups, int) and c != expected:
        raise _C.ArgumentError(f"{op}: weight {tuple(weight.shape)} with groups={groups} expects input with "
                               f"{expected} channels, but got input {tuple(input.shape)} with {c} channels")


def _back_to_1d(out, unbatched):
    out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of an (N, C, L) or (C, L) input with an (out_channels, C/groups, K) weight; padding an int
    or 'valid' / 'same'."""
    op = "conv1d"
    x, w, unbatched = _as_2d(op, input, weight)
    _check_channels(op, input, weight, weight.shape[1] * groups if isinstance(groups, int) else None, groups)
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding", op))
    out = conv2d(x, w, bias, (1, _single(stride, "stride", op)), pad, (1, _single(dilation, "dilation", op)), groups)
    return _back_to_1d(out, unbatched)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 1-D convolution of an (N, C_in, L) or (C_in, L) input with a (C_in, out_channels/groups, K)
    weight."""
    op = "conv_transpose1d"
    x, w, unbatched = _as_2d(op, input, weight)
    _check_channels(op, input, weight, weight.shape[0], groups)
    out = conv_transpose2d(x, w, bias, (1, _single(stride, "stride", op)), (0, _single(padding, "padding", op)),
                           (0, _single(output_padding, "output_padding", op)), groups,
                           (1, _single(dilation, "dilation", op)))
    return _back_to_1d(out, unbatched)
