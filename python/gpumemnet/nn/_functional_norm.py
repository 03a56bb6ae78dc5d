"""Group, layer and instance normalization: PyTorch's functional API over one C op, _C.group_norm (layer 2, nn;
csrc/ops_norm.c, kernels/cpu/group_norm.c). batch_norm lives in _functional_nn.py.

All three normalize contiguous runs of a tensor and apply a per-channel affine, so one kernel serves them:
  group_norm(x, G)     x (N, C, *): each (n, group) run of C/G channels;
  instance_norm(x)     group_norm with G = C (one run per (n, c)); in eval with running statistics it is batch
                       norm's eval form, and its running statistics are updated as PyTorch's are (the mean over
                       the batch of the per-instance statistics);
  layer_norm(x, shape) x viewed as (R, M), M the product of normalized_shape: one group of M one-element
                       "channels" per row, the weight (M,) one value per element. A non-contiguous input (a
                       permuted channels-last tensor in ConvNeXt) is copied to contiguous first, by reshape, and
                       that copy is what backward keeps, in place of the input (PyTorch keeps the input and its
                       kernel copies it again): the same bytes held either way.
Backward keeps the input, the weight (for the input's gradient) and the (N, G) mean and 1/std: never a
normalized copy. Under autocast group_norm and layer_norm run in float32 (PyTorch's CUDA policy); instance_norm,
like batch_norm, follows its input's dtype.
"""

from .. import _C
from .._core.activation import _check_tensor, _fp32_on_cuda
from .._core.autograd import Function, no_grad
from .._core.autograd import as_activation as _as_activation
from .._core.autograd import needs_grad as _needs_grad
from ._functional_nn import batch_norm

__all__ = ["group_norm", "layer_norm", "instance_norm"]


class _GroupNorm(Function):
    reuses_grad = True

    @staticmethod
    def forward(ctx, x, num_groups, weight, bias, eps):
        out, mean, rstd = _C.group_norm(x, num_groups, weight, bias, eps)
        need_x = ctx.needs_input_grad[0]
        ctx.num_groups, ctx.eps = num_groups, eps
        ctx.param_dtype = (weight if weight is not None else bias if bias is not None else x)._dtype
        ctx.needs = (need_x, ctx.needs_input_grad[2], ctx.needs_input_grad[3])
        ctx.save_for_backward(x, weight if need_x else None, _as_activation(mean), _as_activation(rstd))
        ctx.mark_non_differentiable(1, 2)
        return out, mean, rstd

    @staticmethod
    def backward(ctx, g, *unused):
        x, weight, mean, rstd = ctx._unpacked
        dx, dw, db = _C.group_norm_backward(g, x, weight, mean, rstd, ctx.num_groups, *ctx.needs,
                                            param_dtype=ctx.param_dtype, into_grad=ctx.grad_is_free(0))
        return dx, None, dw, db, None

    def name(self):
        return "NativeGroupNormBackward0"


def _group_norm(input, num_groups, weight, bias, eps):
    """(out, mean, rstd), through the Function when a gradient is needed."""
    args = (input, num_groups, weight, bias, float(eps))
    if _needs_grad(input, weight, bias):
        return _GroupNorm.apply(*args)
    return _C.group_norm(*args)


def _check_eps(op, eps):
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"{op}: eps must be a number, got {type(eps).__name__}")


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize each group of num_groups consecutive-channel groups of input (N, C, *) over its channels and
    every other dim, per sample; then scale and shift each channel by weight and bias (C,)."""
    _check_tensor(input, "group_norm")
    _check_eps("group_norm", eps)
    if isinstance(num_groups, bool) or not isinstance(num_groups, int):
        raise TypeError(f"group_norm: num_groups must be an int, got {type(num_groups).__name__}")
    if input.ndim < 2:
        raise RuntimeError(f"group_norm: expected at least 2 dimensions for input tensor but received {input.ndim}")
    if num_groups > 0 and input.shape[1] % num_groups == 0:
        size = [input.shape[0] * input.shape[1] // num_groups, num_groups] + list(input.shape[2:])
        if _prod(size) // size[1] == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
    input, weight, bias = _fp32_on_cuda(input, weight, bias)
    return _group_norm(input, num_groups, weight, bias, eps)[0]


def _shape_tuple(normalized_shape):
    if isinstance(normalized_shape, int) and not isinstance(normalized_shape, bool):
        return (normalized_shape,)
    try:
        shape = tuple(int(s) for s in normalized_shape)
    except TypeError:
        raise TypeError(f"layer_norm: normalized_shape must be an int or a sequence of ints, got "
                        f"{normalized_shape!r}") from None
    return shape


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize input over its last len(normalized_shape) dims, which must equal normalized_shape; then scale
    and shift elementwise by weight and bias (of shape normalized_shape)."""
    _check_tensor(input, "layer_norm")
    _check_eps("layer_norm", eps)
    shape = _shape_tuple(normalized_shape)
    k = len(shape)
    if k == 0:
        raise RuntimeError("layer_norm: expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                           "least one element, but got normalized_shape = []")
    xs = tuple(input.shape)
    if input.ndim < k or xs[input.ndim - k:] != shape:
        raise RuntimeError(f"layer_norm: given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size {list(xs)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            _check_tensor(t, "layer_norm", name)
            if tuple(t.shape) != shape:
                raise RuntimeError(f"layer_norm: expected {name} to be of same shape as normalized_shape, but got "
                                   f"{name} of shape {list(t.shape)} and normalized_shape = {list(shape)}")
    input, weight, bias = _fp32_on_cuda(input, weight, bias)
    M = _prod(shape)
    rows = _prod(xs[:input.ndim - k])
    # (R, M): a view of a contiguous input, a copy of any other (the kernels read contiguous runs)
    x2 = input.reshape(rows, M)
    w2 = weight.reshape(M) if weight is not None and k > 1 else weight
    b2 = bias.reshape(M) if bias is not None and k > 1 else bias
    return _group_norm(x2, 1, w2, b2, eps)[0].view(xs)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) of input (N, C, *) over its spatial dims (use_input_stats), updating the
    running statistics if given; or, with use_input_stats=False, with the running statistics."""
    _check_tensor(input, "instance_norm")
    _check_eps("instance_norm", eps)
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input (N, C, *) with at least one spatial dim, got shape "
                         f"{tuple(input.shape)}")
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and _needs_grad(t):
            raise RuntimeError(f"instance_norm: {name} requires grad; running statistics are buffers updated in "
                               f"place and cannot be part of a graph")
    if (running_mean is None) != (running_var is None):
        raise ValueError("instance_norm: running_mean and running_var must be given together")
    if not use_input_stats:
        if running_mean is None:
            raise ValueError("instance_norm: use_input_stats=False needs running_mean and running_var")
        # every instance normalized with the same per-channel statistics: batch norm's eval form
        return batch_norm(input, running_mean, running_var, weight, bias, False, 0.0, eps)
    spatial = _prod(input.shape[2:])
    if spatial <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{list(input.shape)}")
    C = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and tuple(t.shape) != (C,):
            raise RuntimeError(f"instance_norm: expected {name} of shape ({C},) (one value per channel of input "
                               f"shape {tuple(input.shape)}), got {tuple(t.shape)}")
    out, mean, rstd = _group_norm(input, C, weight, bias, eps)
    # a checkpointed segment re-running its forward for backward moves them again, as PyTorch's does
    if running_mean is not None:
        _update_running(running_mean, running_var, mean, rstd, spatial, float(momentum), float(eps))
    return out


def _update_running(running_mean, running_var, mean, rstd, count, momentum, eps):
    """PyTorch's rule: each running statistic moves towards the batch mean of the per-instance ones, the variance
    unbiased (count - 1). The variance is recovered from 1/std as 1/rstd^2 - eps: float32 rstd keeps it to
    about 1e-7 relative of var + eps."""
    with no_grad():
        batch_mean = mean.mean(0)
        batch_var = (1.0 / (rstd * rstd) - eps).mean(0) * (count / (count - 1))
        running_mean.mul_(1.0 - momentum).add_(batch_mean.to(running_mean.dtype) * momentum)
        running_var.mul_(1.0 - momentum).add_(batch_var.to(running_var.dtype) * momentum)
