"""1-D pooling and adaptive max pooling (layer 2, nn): adaptive_max_pool2d over csrc/ops_pool.c, the 1-D ops
composed from the 2-D ones.

A 1-D op runs its 2-D twin on the (N, C, 1, L) view of an (N, C, L) input (unsqueeze: a view, no copy) with a
(1, k) window, then drops the unit dim (a view again): the same kernels, so CPU/CUDA/meta and the backward come
for free, and the memory is exactly the 2-D op's. 2-D indices h*W + w are w here, PyTorch's 1-D indices.
adaptive_max_pool2d's windows are adaptive average's, [floor(i H / OH), ceil((i + 1) H / OH)); it saves its
int64 indices (8 bytes per output, as PyTorch) and its backward is max_pool2d_backward's window-less scatter of
the gradient to them."""
from .. import _C
from .._core.activation import _check_tensor
from .._core.autograd import Function, as_activation, needs_grad
from ._args import _is_int
from ._functional_pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d

__all__ = ["max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d"]


def _single(value, name, op):
    if _is_int(value):
        return int(value)
    if isinstance(value, (tuple, list)) and len(value) == 1 and _is_int(value[0]):
        return int(value[0])
    raise TypeError(f"{op}: {name} must be an int or a tuple of 1 int, got {value!r}")


def _check_1d(input, op):
    _check_tensor(input, op)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape {tuple(input.shape)}")


def _drop(out, with_indices):
    if with_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    op = "max_pool1d"
    _check_1d(input, op)
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == [] or stride == () else _single(stride, "stride", op)
    out = max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding, "padding", op)),
                     (1, _single(dilation, "dilation", op)), ceil_mode, return_indices)
    return _drop(out, return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    op = "avg_pool1d"
    _check_1d(input, op)
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == [] or stride == () else _single(stride, "stride", op)
    return avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding, "padding", op)), ceil_mode,
                      count_include_pad).squeeze(-2)


def adaptive_avg_pool1d(input, output_size):
    op = "adaptive_avg_pool1d"
    _check_1d(input, op)
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, _single(output_size, "output_size", op))).squeeze(-2)


class _AdaptiveMaxPool2d(Function):
    @staticmethod
    def forward(ctx, x, size, return_indices):
        ctx.in_shape = tuple(x.shape)
        out, idx = _C.adaptive_max_pool2d(x, size)
        ctx.save_for_backward(as_activation(idx))
        if return_indices:
            ctx.mark_non_differentiable(1)
            return out, idx
        return out

    @staticmethod
    def backward(ctx, g, *unused):
        idx, = ctx._unpacked
        return _C.max_pool2d_backward(g, idx, ctx.in_shape), None, None

    def name(self):
        return "AdaptiveMaxPool2DBackward0"


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to a fixed output size (an int, or a pair whose None entries keep the input's size); with
    return_indices also the int64 flat positions h*W + w of the maxima."""
    op = "adaptive_max_pool2d"
    _check_tensor(input, op)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{op}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                           f"{tuple(input.shape)}")
    if _is_int(output_size):
        size = (int(output_size), int(output_size))
    elif isinstance(output_size, (tuple, list)) and len(output_size) == 2 and \
            all(v is None or _is_int(v) for v in output_size):
        size = tuple(input.shape[-2 + i] if v is None else int(v) for i, v in enumerate(output_size))
    else:  # a sequence of another length: PyTorch's RuntimeError; anything else a TypeError
        raise (RuntimeError if isinstance(output_size, (tuple, list)) else TypeError)(
            f"{op}: output_size must be an int or a pair of ints (None keeps that size), got {output_size!r}")
    if size[0] < 0 or size[1] < 0:
        raise _C.ArgumentError(f"{op}: output_size must be non-negative, got {output_size!r}")
    if needs_grad(input):
        return _AdaptiveMaxPool2d.apply(input, size, bool(return_indices))
    out, idx = _C.adaptive_max_pool2d(input, size)
    return (out, idx) if return_indices else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    op = "adaptive_max_pool1d"
    _check_1d(input, op)
    out = adaptive_max_pool2d(input.unsqueeze(-2), (1, _single(output_size, "output_size", op)), return_indices)
    return _drop(out, return_indices)
