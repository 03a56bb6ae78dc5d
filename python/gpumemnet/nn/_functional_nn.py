"""Activations, dropout, batch norm, softmax and losses: PyTorch's functional API over csrc/ops_nnops.c
(layer 2, nn). The activations and softmax are defined in _core/activation.py (Tensor's methods need them)
and re-exported here.

Each op checks its arguments as PyTorch does, then either calls C directly (no gradient needed: nothing is
saved) or goes through a Function whose backward is one C call. What each backward keeps is chosen for memory:
  relu / leaky_relu (slope >= 0) / sigmoid / tanh / softmax / log_softmax (and the others _core/activation.py
    lists) save their OUTPUT, which the next layer usually keeps anyway (so it costs nothing extra), and which
    makes relu_ possible; gelu (silu, hardswish, mish, softplus, prelu) saves its input;
  dropout a 1-byte mask; batch_norm the input plus per-channel mean and 1/std;
  cross_entropy the logits plus one log-sum-exp per position (no probability tensor);
  nll_loss only the target (its gradient does not depend on the input's values).
Running statistics of batch_norm are updated in place by C, outside any graph. Dropout masks come from the
global Philox generator (see kernels/cpu/dropout.h for the stream), so resetting gm.set_rng_state replays them.
"""
import warnings

import numpy as np

from .. import _C
from .._core.activation import (  # noqa: F401  (the activations live in the core: Tensor.relu() etc. use them)
    _check_tensor, _fp32, relu, relu_, leaky_relu, leaky_relu_, sigmoid, tanh, gelu, silu, hardswish, hardsigmoid,
    mish, hardtanh, hardtanh_, relu6, elu, elu_, softplus, prelu, softmax, log_softmax)
from .._core import autocast as _amp
from .._core.autograd import Function
from .._core.autograd import as_activation as _as_activation
from .._core.autograd import check_inplace as _check_inplace, needs_grad as _needs_grad
from .._core.state import state, warn_outside
from .._core.dtype import DISPLAY, SCALAR_TYPE_NAMES
from .._core.tensor_misc import promote_types
from ._args import check_reduction

__all__ = ["relu", "relu_", "leaky_relu", "leaky_relu_", "sigmoid", "tanh", "gelu", "silu", "hardswish",
           "hardsigmoid", "mish", "hardtanh", "hardtanh_", "relu6", "elu", "elu_", "softplus", "prelu", "dropout",
           "dropout2d", "batch_norm",
           "softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
           "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "kl_div"]

# op codes: kernels/loss_ops.h
MSE, L1, SMOOTH_L1, HUBER, BCE, KL_DIV = range(6)
_BACKWARD_NAMES = ("MseLossBackward0", "L1LossBackward0", "SmoothL1LossBackward0", "HuberLossBackward0",
                   "BinaryCrossEntropyBackward0", "KlDivBackward0")
_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _reduction(reduction, op):
    code = _REDUCTIONS.get(reduction) if isinstance(reduction, str) else None
    if code is None:
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    return code


def _no_grad_for(t, op, name):
    """Weights of the losses are constants here: refuse rather than silently give them no gradient."""
    if t is not None and _needs_grad(t):
        raise RuntimeError(f"{op}: {name} requires grad, but gradients with respect to {name} are not supported; "
                           f"pass {name}.detach()")


# ---- dropout ------------------------------------------------------------------------------------------------------
def _mask_p(x, p):
    """The p the mask is drawn with. An estimate's meta run (state.meta_draws_random off on its thread) uses 1:
    C draws no random numbers for p = 1 and allocates the same output and mask, so an estimate never moves the
    global Philox offset under a trainer's dropout running in another thread (a meta tensor has no values to
    mask anyway). A meta run outside an estimate draws as the real run would."""
    return 1.0 if x._device == "meta" and not state.meta_draws_random else p


class _Dropout(Function):
    reuses_grad = True

    @staticmethod
    def forward(ctx, x, p, channelwise, inplace):
        out, mask = _C.dropout(x, _mask_p(x, p), channelwise, inplace)
        ctx.p = p
        ctx.save_for_backward(_as_activation(mask))
        return out

    @staticmethod
    def backward(ctx, g):
        mask, = ctx._unpacked
        return _C.dropout_backward(g, mask, ctx.p, ctx.grad_is_free(0)), None, None, None

    def name(self):
        return "DropoutBackward0"


def _dropout(input, p, training, inplace, channelwise, op):
    _check_tensor(input, op)
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"{op}: p must be a number, got {type(p).__name__}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input  # the identity: no copy, no mask, no random numbers drawn
    if inplace:
        if _check_inplace(input, op + "_"):
            return _Dropout.apply(input, float(p), channelwise, True)
        return _C.dropout(input, _mask_p(input, float(p)), channelwise, True)[0]
    if _needs_grad(input):
        return _Dropout.apply(input, float(p), channelwise, False)
    return _C.dropout(input, _mask_p(input, float(p)), channelwise, False)[0]


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1/(1-p)."""
    return _dropout(input, p, training, inplace, False, "dropout")


def channel_dropout(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a 4-D (N, C, H, W) or 3-D (C, H, W) input: the kernel dropout1d / dropout3d run on
    views of their inputs."""
    return _dropout(input, p, training, inplace, True, "dropout2d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) input with probability p. As PyTorch (and with its warnings), a 3-D input
    is (N, C, L), each (n, c) row dropped (not an unbatched (C, H, W): pytorch#77081), and a 2-D one (N, C) is
    dropped elementwise (pytorch/examples' mnist_rnn applies Dropout2d to an LSTM's (N, 64) output)."""
    nd = input.ndim if isinstance(input, _C.TensorBase) else 4
    if nd not in (3, 4):
        warnings.warn(f"dropout2d: Received a {nd}-D input to dropout2d, which is deprecated and will result in an "
                      f"error in a future release. To retain the behavior and silence this warning, please use "
                      f"dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      f"spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      f"inputs).", stacklevel=2)
    if nd == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", stacklevel=2)
    if nd in (2, 3) and training and p > 0:  # the (N, C) rows of a (N, C, L, 1) input, in the 4-D kernel
        shape = tuple(input.shape)
        out = _dropout(input.reshape(shape + (1,) * (4 - nd)), p, training, False, True, "dropout2d").reshape(shape)
        return input.copy_(out) if inplace else out
    return _dropout(input, p, training, inplace, True, "dropout2d")


# ---- batch norm -------------------------------------------------------------------------------------------------
class _BatchNorm(Function):
    reuses_grad = True

    @staticmethod
    def forward(ctx, x, running_mean, running_var, weight, bias, training, momentum, eps):
        out, mean, invstd = _C.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)
        need_x, need_w, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[3], ctx.needs_input_grad[4]
        ctx.training, ctx.eps = training, eps
        ctx.param_dtype = (weight if weight is not None else bias if bias is not None else x)._dtype
        # In eval mode dx = g * w * invstd: the input is needed only for the weight's gradient.
        keep_x = training or need_w
        ctx.save_for_backward(x if keep_x else None, weight if need_x else None, _as_activation(mean),
                              _as_activation(invstd))
        ctx.needs = (need_x, need_w, need_b)
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight, mean, invstd = ctx._unpacked
        dx, dw, db = _C.batch_norm_backward(g, x, weight, mean, invstd, ctx.training, *ctx.needs,
                                            param_dtype=ctx.param_dtype, into_grad=ctx.grad_is_free(0))
        return dx, None, None, dw, db, None, None, None

    def name(self):
        return "NativeBatchNormBackward0"


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalize each channel (dim 1) of input over every other dim. training: batch statistics, and the running
    ones (if given) are updated in place with the unbiased variance; eval: the running statistics."""
    _check_tensor(input, "batch_norm")
    if momentum is None:
        raise ValueError("batch_norm: momentum=None (a cumulative average) needs the module's batch count; pass "
                         "the factor as a number")
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and _needs_grad(t):
            raise RuntimeError(f"batch_norm: {name} requires grad; running statistics are buffers updated in "
                               f"place and cannot be part of a graph")
    if training and not float(eps) > 0:  # PyTorch's checks and words; a negative eps gives NaN (sqrt of var + eps)
        raise ValueError(f"batch_norm eps must be positive during training, but got {float(eps)}")
    if not float(eps) >= 0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {float(eps)}")
    if training and input.ndim >= 2:
        size = list(input.shape)
        per_channel = 1
        for i, s in enumerate(size):
            per_channel *= s if i != 1 else 1
        if per_channel == 1:  # PyTorch's check and words (its _verify_batch_size)
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
        if per_channel == 0:  # an empty batch (a head on the rows a mask selected: none): empty out, stats kept
            return input * 1.0 if input.is_floating_point() else input.clone()
    args = (input, running_mean, running_var, weight, bias, bool(training), float(momentum), float(eps))
    if _needs_grad(input, weight, bias):
        return _BatchNorm.apply(*args)
    return _C.batch_norm(*args)[0]


def _legacy(reduction, size_average, reduce, stacklevel=3):
    """reduction from PyTorch's deprecated size_average / reduce keywords, when a script passes them (PyTorch-GAN's
    StarGAN: size_average=False), with PyTorch's warning (the losses' functions and modules give it)."""
    if size_average is None and reduce is None:
        return reduction
    reduction = check_reduction(reduction, size_average, reduce)
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
                  UserWarning, stacklevel=stacklevel)
    return reduction


# ---- class losses -----------------------------------------------------------------------------------------------
class _CrossEntropy(Function):
    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, reduction, label_smoothing):
        loss, lse, wsum = _C.cross_entropy(x, target, weight, ignore_index, reduction, label_smoothing)
        ctx.args = (ignore_index, reduction, label_smoothing, wsum)
        ctx.save_for_backward(x, target, weight, _as_activation(lse))
        return loss

    @staticmethod
    def backward(ctx, g):
        x, target, weight, lse = ctx._unpacked
        return _C.cross_entropy_backward(g, x, target, weight, lse, *ctx.args), None, None, None, None, None

    def name(self):
        return "NllLossBackward0"


def _class_loss_args(op, input, target, weight, ignore_index, reduction):
    _check_tensor(input, op)
    _check_tensor(target, op, "target")
    if weight is not None:
        _check_tensor(weight, op, "weight")
    _no_grad_for(weight, op, "weight")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"{op}: ignore_index must be an int, got {type(ignore_index).__name__}")
    return _reduction(reduction, op)


def _byte_target(input, target):
    """PyTorch's nll_loss takes uint8 class indices as well as int64 for an (N, C) or (C,) input (labels read from
    a file as bytes), not for more dims: as int64."""
    return target.long() if target._dtype == 6 and input.ndim <= 2 else target


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Log-softmax over dim 1 (dim 0 for unbatched (C,) input) and negative log-likelihood of the class index
    targets, in one fused kernel. mean divides by the summed weight of the non-ignored targets (PyTorch's rule);
    label_smoothing mixes in the uniform distribution over the C classes. A float target of input's shape holds
    class probabilities (mixup, cutmix): _cross_entropy_probs."""
    reduction = _legacy(reduction, size_average, reduce)
    red = _class_loss_args("cross_entropy", input, target, weight, ignore_index, reduction)
    # a float target of input's shape holds class probabilities; any other float target is refused by C
    if not 0.0 <= label_smoothing <= 1.0:
        raise _C.ArgumentError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if target.is_floating_point() and tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probs(input, target, weight, ignore_index, red, float(label_smoothing))
    input, weight = _fp32(input, weight)
    target = _byte_target(input, target)
    args = (input, target, weight, ignore_index, red, float(label_smoothing))
    if _needs_grad(input):
        return _CrossEntropy.apply(*args)
    return _C.cross_entropy(*args)[0]


def _cross_entropy_probs(input, target, weight, ignore_index, red, eps):
    """Class-probability targets (mixup / cutmix in torchvision's reference script): -sum_c w_c t_c log_softmax(x)_c
    per position, t smoothed to t (1 - eps) + eps / C; mean divides by the number of positions. Composed from
    log_softmax and elementwise ops, as PyTorch composes it (the log-probabilities and one product are the
    temporaries), so every device, meta and the gradients of input and target follow."""
    if ignore_index != -100:
        raise RuntimeError("ignore_index is not supported for floating point target")
    input, target, weight = _fp32(input, target, weight)
    dim = 1 if input.ndim > 1 else 0
    C = input.shape[dim]
    if eps > 0:
        target = target * (1.0 - eps) + eps / C
    prod = log_softmax(input, dim) * target
    if weight is not None:
        prod = prod * (weight.reshape((C,) + (1,) * (input.ndim - 2)) if input.ndim > 1 else weight)
    loss = -prod.sum(dim)
    return loss if red == 0 else loss.mean() if red == 1 else loss.sum()


class _NllLoss(Function):
    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, reduction):
        loss, wsum = _C.nll_loss(x, target, weight, ignore_index, reduction)
        ctx.args = (ignore_index, reduction, wsum, tuple(x.shape), x._dtype)
        ctx.save_for_backward(target, weight)
        return loss

    @staticmethod
    def backward(ctx, g):
        target, weight = ctx._unpacked
        return _C.nll_loss_backward(g, target, weight, *ctx.args), None, None, None, None

    def name(self):
        return "NllLossBackward0"


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of class index targets; input holds log-probabilities (N, C, ...) or (C,)."""
    reduction = _legacy(reduction, size_average, reduce)
    red = _class_loss_args("nll_loss", input, target, weight, ignore_index, reduction)
    input, weight = _fp32(input, weight)
    target = _byte_target(input, target)
    if _needs_grad(input):
        return _NllLoss.apply(input, target, weight, ignore_index, red)
    return _C.nll_loss(input, target, weight, ignore_index, red)[0]


# ---- pointwise losses --------------------------------------------------------------------------------------------
class _PointwiseLoss(Function):
    @staticmethod
    def forward(ctx, x, target, op, reduction, param):
        ctx.op, ctx.reduction, ctx.param = op, reduction, param
        ctx.save_for_backward(x, target)
        return _C.pointwise_loss(op, x, target, reduction, param)

    @staticmethod
    def backward(ctx, g):
        x, target = ctx._unpacked
        dx, dt = _C.pointwise_loss_backward(ctx.op, g, x, target, ctx.reduction, ctx.needs_input_grad[0],
                                            ctx.needs_input_grad[1], ctx.param)
        return dx, dt, None, None, None

    def name(self):
        return _BACKWARD_NAMES[self.op]


def _pointwise_loss(input, target, reduction, op, opname, param=0.0):
    _check_tensor(input, opname)
    _check_tensor(target, opname, "target")
    red = _reduction(reduction, opname)
    input, target = _fp32(input, target)
    if input._dtype != target._dtype and op != BCE:
        input, target = _promoted(input, target)
    if op != BCE and input.shape != target.shape:
        input, target = _broadcast(input, target, opname, warn=op != KL_DIV)
    if _needs_grad(input, target):
        return _PointwiseLoss.apply(input, target, op, red, float(param))
    return _C.pointwise_loss(op, input, target, red, float(param))


def _promoted(*tensors):
    """Tensors of different dtypes cast to the one arithmetic of them gives, as PyTorch's regression losses do (a
    float32 model's output against a float64 target from NumPy gives a float64 loss); None stays None."""
    present = [t for t in tensors if t is not None]
    dt = present[0].dtype
    for t in present[1:]:
        dt = promote_types(dt, t.dtype)
    return tuple(t if t is None or t.dtype == dt else t.to(dt) for t in tensors)


def _broadcast(input, target, opname, warn=True):
    """The regression losses broadcast input and target, with PyTorch's warning (a (N, 1) output against an (N,)
    target is the classic silent mistake; kl_div broadcasts without it, as PyTorch's); shapes that do not
    broadcast raise."""
    try:
        shape = tuple(np.broadcast_shapes(tuple(input.shape), tuple(target.shape)))
    except ValueError:
        raise _C.ArgumentError(f"{opname}: the size of input {tuple(input.shape)} and of target "
                               f"{tuple(target.shape)} cannot be broadcast together") from None
    if warn:
        warnings.warn(f"Using a target size ({_size_repr(target)}) that is different to the input size "
                      f"({_size_repr(input)}). This will likely lead to incorrect results due to broadcasting. "
                      f"Please ensure they have the same size.", UserWarning, stacklevel=4)
    return input.expand(shape), target.expand(shape)


def _size_repr(t):
    return f"{DISPLAY[0]}.Size({list(t.shape)})"


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(input - target)^2; input and target broadcast, with PyTorch's warning when their shapes differ. weight (of
    input's shape) scales each term; its mean is then the weighted one (PyTorch's)."""
    reduction = _legacy(reduction, size_average, reduce)
    if weight is not None:
        return _weighted_loss(lambda i, t: (i - t) ** 2, input, target, weight, reduction, "mse_loss")
    return _pointwise_loss(input, target, reduction, MSE, "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target|; input and target broadcast, with PyTorch's warning when their shapes differ. weight as
    mse_loss's."""
    reduction = _legacy(reduction, size_average, reduce)
    if weight is not None:
        return _weighted_loss(lambda i, t: (i - t).abs(), input, target, weight, reduction, "l1_loss")
    return _pointwise_loss(input, target, reduction, L1, "l1_loss")


def _weighted_loss(terms, input, target, weight, reduction, op):
    """PyTorch's weighted form of mse / l1 / huber: terms(input, target) * weight, whose mean is divided by the
    summed weight."""
    _check_tensor(weight, op, "weight")
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{op}: Weights and input must have the same size; weight has shape {tuple(weight.shape)}, "
                         f"input {tuple(input.shape)}")
    red = _reduction(reduction, op)
    loss = terms(input, target) * weight
    if red == _REDUCTIONS["none"]:
        return loss
    return loss.sum() if red == _REDUCTIONS["sum"] else loss.sum() / weight.sum()


def _number(v, op, name):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__}")
    return float(v)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target); beta = 0 is l1_loss."""
    reduction = _legacy(reduction, size_average, reduce)
    return _pointwise_loss(input, target, reduction, SMOOTH_L1, "smooth_l1_loss", _number(beta, "smooth_l1_loss",
                                                                                          "beta"))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta): smooth_l1_loss times delta (beta = delta). weight
    as mse_loss's."""
    if weight is not None:
        return _weighted_loss(lambda i, t: huber_loss(i, t, "none", delta), input, target, weight, reduction,
                              "huber_loss")
    return _pointwise_loss(input, target, reduction, HUBER, "huber_loss", _number(delta, "huber_loss", "delta"))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)) of probabilities x (each log clamped at -100, as PyTorch); the CPU raises
    RuntimeError for an x outside [0, 1]. weight broadcasts to input."""
    reduction = _legacy(reduction, size_average, reduce)
    op = "binary_cross_entropy"
    _check_tensor(input, op)
    _check_tensor(target, op, "target")
    if tuple(target.shape) != tuple(input.shape):  # before the dtypes, as PyTorch checks (a ValueError)
        raise ValueError(f"{op}: target shape {tuple(target.shape)} does not match input shape "
                         f"{tuple(input.shape)} (they must be equal)")
    red = _reduction(reduction, op)
    if _amp.is_autocast_enabled("cuda"):  # PyTorch's CUDA autocast refuses it, with this advice
        raise RuntimeError(
            "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
            "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
            "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
            "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
            "safe to autocast.")
    if weight is None:
        return _pointwise_loss(input, target, reduction, BCE, op)
    _check_tensor(weight, op, "weight")
    _no_grad_for(weight, op, "weight")
    # A weight is applied as PyTorch's kernel does it too: the unreduced loss (one tensor of input's size),
    # times the weight, then reduced; composed from differentiable ops, so every device and the meta bytes follow.
    (weight,) = _fp32(weight)
    loss = _pointwise_loss(input, target, "none", BCE, op) * weight
    if tuple(loss.shape) != tuple(input.shape):
        raise ValueError(f"{op}: weight shape {tuple(weight.shape)} cannot be broadcast to input shape "
                         f"{tuple(input.shape)}")
    return loss if red == 0 else loss.mean() if red == 1 else loss.sum()


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise KL divergence of log-probabilities input from target: t (log t - input), or, with log_target,
    exp(t) (t - input). 'batchmean' divides the sum by input.size(0) (the true KL divergence per sample); 'mean'
    divides by the element count, as PyTorch does."""
    op = "kl_div"
    if size_average is not None or reduce is not None:  # PyTorch's deprecated form of reduction
        reduction = ("mean" if size_average is None or size_average else "sum") if reduce is None or reduce \
            else "none"
    elif reduction == "mean":  # PyTorch's warning, each call (not for the legacy arguments' mean)
        warn_outside("reduction: 'mean' divides the total loss by both the batch size and the support size."
                     "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                     "'mean' will be changed to behave the same as 'batchmean' in the next major release.")
    if isinstance(input, _C.TensorBase) and isinstance(target, _C.TensorBase) and \
            not (input.is_floating_point() and target.is_floating_point()):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if reduction == "batchmean":
        _check_tensor(input, op)
        total = _pointwise_loss(input, target, "sum", KL_DIV, op, float(bool(log_target)))
        return total / input.shape[0] if input.ndim > 0 else total
    return _pointwise_loss(input, target, reduction, KL_DIV, op, float(bool(log_target)))


class _BceWithLogits(Function):
    @staticmethod
    def forward(ctx, x, target, weight, pos_weight, reduction):
        ctx.reduction = reduction
        ctx.save_for_backward(x, target, weight, pos_weight)
        return _C.bce_with_logits(x, target, weight, pos_weight, reduction)

    @staticmethod
    def backward(ctx, g):
        x, target, weight, pos_weight = ctx._unpacked
        dx, dt = _C.bce_with_logits_backward(g, x, target, weight, pos_weight, ctx.reduction,
                                             ctx.needs_input_grad[0], ctx.needs_input_grad[1])
        return dx, dt, None, None, None

    def name(self):
        return "BinaryCrossEntropyWithLogitsBackward0"


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Sigmoid + binary cross-entropy in the stable form; weight broadcasts to input, pos_weight (the weight of
    positive examples, e.g. one per class of the last dim) too."""
    reduction = _legacy(reduction, size_average, reduce)
    op = "binary_cross_entropy_with_logits"
    _check_tensor(input, op)
    _check_tensor(target, op, "target")
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        if t is not None:
            _check_tensor(t, op, name)
        _no_grad_for(t, op, name)
    red = _reduction(reduction, op)
    # an integer input or target is refused as PyTorch refuses it (an int64 target of 0/1 actions, SB3's
    # Bernoulli.log_prob: the loss would be written into the target's dtype, truncated)
    if not input.is_floating_point():
        raise NotImplementedError(f"\"log_sigmoid_cpu\" not implemented for '{SCALAR_TYPE_NAMES[input._dtype]}'")
    if not target.is_floating_point():
        raise RuntimeError(f"result type {SCALAR_TYPE_NAMES[input._dtype]} can't be cast to the desired output type "
                           f"{SCALAR_TYPE_NAMES[target._dtype]}")
    # integer or bool weights (d2l's word2vec passes its 0/1 mask as weight) multiply as PyTorch's promotion does
    weight, pos_weight = (t.to(input.dtype) if t is not None and not t.is_floating_point() else t
                          for t in (weight, pos_weight))
    input, target, weight, pos_weight = _fp32(input, target, weight, pos_weight)
    if input._dtype != target._dtype:
        # computed in the promoted dtype; PyTorch's result has the target's (its formula writes into the target's
        # dtype in place)
        out_dtype = target.dtype
        input, target, weight, pos_weight = _promoted(input, target, weight, pos_weight)
        return binary_cross_entropy_with_logits(input, target, weight, reduction=reduction,
                                                pos_weight=pos_weight).to(out_dtype)
    if _needs_grad(input, target):
        return _BceWithLogits.apply(input, target, weight, pos_weight, red)
    return _C.bce_with_logits(input, target, weight, pos_weight, red)

