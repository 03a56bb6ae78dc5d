"""More of nn.functional, composed of the core's differentiable ops as PyTorch defines them (so every device, meta
and the gradients follow): scaled_dot_product_attention, the remaining activations (selu, celu, glu, logsigmoid,
softsign, softshrink, hardshrink, tanhshrink, threshold, softmin), pairwise_distance, channel_shuffle, and the
metric-learning and multi-label losses."""
import math

import numpy as np

from .. import _C
from .._core.activation import _check_tensor
from .._core.autocast import autocast, float32_op
from .._core.autograd import Function, no_grad
from .._core.tensor import matmul as _matmul
from ._args import check_reduction, fresh as _fresh
from ._functional_distance import cosine_similarity
from ._functional_nn import dropout, softmax, softplus

def _check_tensors(op, *named):
    for name, t in named:
        _check_tensor(t, op, name)


def _reduce(loss, reduction, size_average=None, reduce=None):
    """loss reduced as `reduction` says (or PyTorch's deprecated size_average / reduce, when given)."""
    reduction = check_reduction(reduction, size_average, reduce)
    return loss if reduction == "none" else loss.mean() if reduction == "mean" else loss.sum()


# ---- attention ---------------------------------------------------------------------------------------------
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value over the last two dims (L, S), PyTorch's math: scale defaults
    to 1/sqrt(E); a bool attn_mask keeps where True, a float one is added; a query row with every key masked gets
    zeros (not NaN: a left-padded batch through Hugging Face's models has such rows); is_causal masks the upper
    triangle; enable_gqa repeats key/value heads to query's. Holds the (..., L, S) weights, as PyTorch's math path
    does."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(t, "scaled_dot_product_attention", name)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query's last dim ({query.shape[-1]}) must equal key's "
                           f"({key.shape[-1]})")
    if enable_gqa:
        key, value = gqa_repeated(query, key, value)
    s = (1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else math.inf) if scale is None else scale
    # as PyTorch's kernels for half inputs: the scores, the mask's sum and the softmax in float32, the weights
    # rounded once, before they multiply value (scores rounded to bfloat16 made outputs 3x less accurate)
    half = query._dtype in (2, 3) and key._dtype == query._dtype
    scores = (_HalfScores.apply(query, key) if half else _matmul(query, key.transpose(-2, -1))) * s
    L, S = query.shape[-2], key.shape[-2]
    if is_causal:
        attn_mask = _C.from_numpy(np.asarray(np.tri(L, S, 0, dtype=bool), order="C"), 5, query._device)
    empty = None  # the query rows whose every key is masked out: PyTorch (2.5 on) gives them zero weights
    if attn_mask is not None:
        if attn_mask._dtype not in (5, 0, query._dtype):  # bool, float32 or query's (a 0/1 int mask: a bias)
            raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                               f"attn_mask.dtype: {str(attn_mask.dtype).split('.')[-1]} and  query.dtype: "
                               f"{str(query.dtype).split('.')[-1]} instead.")
        if attn_mask._dtype == 5:
            scores, empty = kept_scores(scores, attn_mask)
        else:
            empty = attn_mask.isneginf().all(-1, keepdim=True)
            scores = scores + attn_mask.masked_fill(empty, 0.0)
    weights = softmax(scores, dim=-1)  # finite everywhere: an empty row is left unmasked here, then zeroed
    if empty is not None:
        weights = weights.masked_fill(empty, 0.0)
    if half:
        weights = weights.to(query.dtype)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return _matmul(weights, value)


class _HalfScores(Function):
    """query @ key^T of half-precision inputs as float32 scores, saving the inputs themselves (float32 copies saved
    by a matmul would double what attention keeps for backward). Its products are float32 under autocast too,
    which would lower them (and backward's float32 gradient would then meet bfloat16 operands)."""

    @staticmethod
    def forward(ctx, q, k):
        ctx.save_for_backward(q, k)
        with autocast("cpu", enabled=False):  # off on every device
            return q.float().matmul(k.float().transpose(-2, -1))

    @staticmethod
    def backward(ctx, g):
        q, k = ctx._unpacked
        with autocast("cpu", enabled=False):
            dq = g.matmul(k.float()).sum_to_size(q.shape).to(q.dtype) if ctx.needs_input_grad[0] else None
            dk = g.transpose(-2, -1).matmul(q.float()).sum_to_size(k.shape).to(k.dtype) \
                if ctx.needs_input_grad[1] else None
        return dq, dk


def gqa_repeated(query, key, value):
    """key and value with their heads (dim -3) repeated to query's count (grouped-query attention's enable_gqa)."""
    if query.ndim < 3 or key.shape[-3] == query.shape[-3]:
        return key, value
    reps = query.shape[-3] // key.shape[-3]
    return key.repeat_interleave(reps, dim=-3), value.repeat_interleave(reps, dim=-3)


def kept_scores(scores, keep):
    """(scores with -inf where the bool mask keep drops a key, the (..., L, 1) mask of the query rows that keep no
    key). Such a row is left unmasked here, so that its softmax stays finite: the caller zeroes its weights after,
    as PyTorch (2.5 on) answers it (flex_attention.py too)."""
    empty = keep.logical_not().all(-1, keepdim=True)
    return scores.masked_fill((keep | empty).logical_not(), float("-inf")), empty


# ---- activations ---------------------------------------------------------------------------------------------
def _written(input, out, inplace):
    """inplace=True writes out into input, recorded as a copy_ in a graph (on a view of a tensor in a graph too, by
    copy_'s view write), so input holds the result as with PyTorch's single in-place kernel."""
    return input.copy_(out) if inplace else out


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _elu_like(x, alpha, input_scale=1.0):
    """x where x > 0, else alpha * (exp(x * input_scale) - 1): ELU, and CELU with input_scale 1 / alpha. At 0 the
    gradient is the negative branch's, alpha * input_scale, as PyTorch's (a sum of two clamps would give 0 there);
    the exponential reads x where x <= 0 and 0 elsewhere, so that the branch not taken cannot overflow into a NaN
    gradient (clamp(max=0) would pass no gradient at 0)."""
    neg = x <= 0
    return x.where(~neg, (x.where(neg, 0.0) * input_scale).expm1() * alpha)


def selu(input, inplace=False):
    _check_tensor(input, "selu")
    out = _elu_like(input, _SELU_ALPHA) * _SELU_SCALE
    return _written(input, out, inplace)


def celu(input, alpha=1.0, inplace=False):
    _check_tensor(input, "celu")
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    out = _elu_like(input, alpha, 1.0 / alpha)
    return _written(input, out, inplace)


def glu(input, dim=-1):
    """The first half along dim times the sigmoid of the second."""
    _check_tensor(input, "glu")
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.ndim} is size {n}")
    a, b = input.narrow(dim, 0, n // 2), input.narrow(dim, n // 2, n // 2)
    return a * b.sigmoid()


def logsigmoid(input):
    _check_tensor(input, "logsigmoid")
    return -softplus(-input)


def softsign(input):
    _check_tensor(input, "softsign")
    return input / (input.abs() + 1.0)


def softshrink(input, lambd=0.5):
    _check_tensor(input, "softshrink")
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return (input - lambd).clamp(min=0) + (input + lambd).clamp(max=0)


def hardshrink(input, lambd=0.5):
    _check_tensor(input, "hardshrink")
    return input.masked_fill(input.abs() <= lambd, 0.0)


def tanhshrink(input):
    _check_tensor(input, "tanhshrink")
    return input - input.tanh()


def threshold(input, threshold, value, inplace=False):
    """input where input > threshold, value elsewhere."""
    _check_tensor(input, "threshold")
    out = input.masked_fill(input <= threshold, value)
    return _written(input, out, inplace)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    _check_tensor(input, "softmin")
    return softmax(-input, dim=dim, dtype=dtype)


# ---- distances, shuffles ----------------------------------------------------------------------------------------
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (PyTorch adds eps to the difference)."""
    _check_tensor(x1, "pairwise_distance", "x1")
    _check_tensor(x2, "pairwise_distance", "x2")
    return (x1 - x2 + eps).norm(p, -1, keepdim)


def channel_shuffle(input, groups):
    """(N, g * c, ...) -> channels interleaved across the g groups (ShuffleNet)."""
    _check_tensor(input, "channel_shuffle")
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    c = input.shape[1]
    if groups <= 0 or c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    return _fresh(input.reshape((input.shape[0], groups, c // groups) + rest).transpose(1, 2).reshape(input.shape),
                  input)


# ---- losses ---------------------------------------------------------------------------------------------------
@float32_op
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    _check_tensors("margin_ranking_loss", ("input1", input1), ("input2", input2), ("target", target))
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction, size_average, reduce)


@float32_op
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    _check_tensors("hinge_embedding_loss", ("input", input), ("target", target))
    # PyTorch's terms: the input where target != -1, the clamped margin where target != 1 (a 0 target gets both)
    loss = input.where(target != -1, 0.0) + (margin - input).clamp(min=0).where(target != 1, 0.0)
    return _reduce(loss, reduction, size_average, reduce)


@float32_op
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _check_tensors("soft_margin_loss", ("input", input), ("target", target))
    return _reduce((-target * input).exp().log1p(), reduction, size_average, reduce)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per sample: -mean over classes of y log sigmoid(x) + (1 - y) log sigmoid(-x) (weighted per class)."""
    _check_tensor(input, "multilabel_soft_margin_loss")
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.sum(-1) / input.shape[-1], reduction, size_average, reduce)


@float32_op
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    _check_tensors("cosine_embedding_loss", ("input1", input1), ("input2", input2), ("target", target))
    # PyTorch's cosine: 1e-12 (a float32 constant) added to each squared norm (cosine_similarity's eps=1e-8 clamp
    # gave 0.29 for 0.99 at norms near 1e-7)
    eps = 9.999999960041972e-13
    prod = (input1 * input2).sum(-1)
    cos = prod / (((input1 * input1).sum(-1) + eps) * ((input2 * input2).sum(-1) + eps)).sqrt()
    loss = (1 - cos).where(target == 1, 0.0) + (cos - margin).clamp(min=0).where(target == -1, 0.0)
    return _reduce(loss, reduction, size_average, reduce)


@float32_op
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    _check_tensors("triplet_margin_loss", ("anchor", anchor), ("positive", positive), ("negative", negative))
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clamp(min=0), reduction, size_average, reduce)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) with full). var is input's
    shape, or one variance per sample (input.shape[:-1], or a size-1 dim where input's differs), or a float. As in
    PyTorch, the clamp to eps does not stop var's gradient (it is applied to a copy, outside the graph)."""
    _check_tensors("gaussian_nll_loss", ("input", input), ("target", target))
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * input.new_ones(input.shape)
    elif not isinstance(var, _C.TensorBase):
        raise TypeError(f"gaussian_nll_loss: var must be a Tensor or a float, got {type(var).__name__}")
    elif var._device != "meta" and bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if var.shape == input.shape[:-1]:
            var = var.unsqueeze(-1)  # one variance per sample, over the last dim's features
        elif not (var.dim() == input.dim() and
                  sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):  # one size-1 dim to broadcast
            raise ValueError(f"var is of incorrect size: input {tuple(input.shape)}, var {tuple(var.shape)}; "
                             f"expected input's shape, input.shape[:-1], or a 1 in one of input's dims")
    check_reduction(reduction)
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@float32_op
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    _check_tensors("poisson_nll_loss", ("input", input), ("target", target))
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:  # Stirling's term, where target > 1
        stirling = target * target.clamp(min=1).log() - target + 0.5 * (2 * math.pi * target.clamp(min=1)).log()
        loss = loss + stirling.where(target > 1, 0.0)
    return _reduce(loss, reduction, size_average, reduce)
