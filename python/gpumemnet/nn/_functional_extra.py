"""More of torch.nn.functional: multi-head attention, rms_norm, local_response_norm, bilinear, rrelu, gumbel_softmax,
pdist and the in-place activations (celu_, selu_, threshold_, rrelu_), composed of the core's differentiable ops as
PyTorch defines them, so every device, meta and the gradients follow. The pools (lp_pool, max_unpool, upsample*),
the margin losses and embedding_bag are in _functional_extra2.py, re-exported here; nn.functional imports __all__."""
import math
import sys
import warnings

from .._core.activation import _check_tensor
from .._core.autograd import Function, no_grad, refuse_inplace
from .._core.creation import cat, rand, tensor, zeros
from .._core.creation_more import triu_indices
from ._functional_layers import pad
from ._functional_more import _written, celu, selu
from ._functional_nn import leaky_relu, softmax
from ._functional_norm import _shape_tuple
from ._functional_extra2 import *  # noqa: F401,F403 - the pools and losses, re-exported
from ._functional_extra2 import __all__ as _all2

__all__ = ["multi_head_attention_forward", "rms_norm", "local_response_norm", "bilinear", "rrelu", "rrelu_",
           "celu_", "selu_", "threshold_", "gumbel_softmax", "pdist"] + _all2


def _name(dtype):
    return str(dtype).split(".")[-1]


# ---- multi-head attention ----------------------------------------------------------------------------------------
def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """Whether the call is batched (3-D query) or not (2-D); PyTorch's AssertionError for other ranks."""
    if query.ndim not in (2, 3):
        raise AssertionError(f"multi_head_attention_forward: query should be unbatched 2D or batched 3D tensor but "
                             f"received {query.ndim}-D query tensor")
    batched = query.ndim == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"multi_head_attention_forward: for {kind} `query`, expected `key` and `value` to be "
                             f"{query.ndim}-D but found {key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise AssertionError(f"multi_head_attention_forward: for {kind} `query`, expected `key_padding_mask` to be "
                             f"`None` or {query.ndim - 1}-D but found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(f"multi_head_attention_forward: for {kind} `query`, expected `attn_mask` to be "
                                 f"`None`, 2-D or 3-D but found {attn_mask.ndim}-D tensor instead")
        if not batched and attn_mask.ndim == 3:
            expected = (num_heads, query.shape[0], key.shape[0])
            if tuple(attn_mask.shape) != expected:
                raise AssertionError(f"multi_head_attention_forward: expected `attn_mask` shape to be {expected} "
                                     f"but got {tuple(attn_mask.shape)}")
    return batched


def _canonical_mask(mask, name, other, other_name, dtype):
    """A bool mask (True = masked out) as an additive float mask of dtype (-inf where True); a float mask as it is.
    Mixing a bool and a float mask is deprecated in PyTorch, and warned about the same way."""
    if mask is None:
        return None
    _check_tensor(mask, "multi_head_attention_forward", name)
    is_float = mask.dtype.is_floating_point
    if mask._dtype != 5 and not is_float:
        raise AssertionError(f"only bool and floating types of {name} are supported, got {_name(mask.dtype)}")
    if other is not None and mask.dtype != other.dtype:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both "
                      f"instead.", stacklevel=3)
    if is_float:
        return mask
    return zeros(tuple(mask.shape), dtype=dtype, device=mask._device).masked_fill(mask, float("-inf"))


def _in_projection(query, key, value, w_q, w_k, w_v, b_q, b_k, b_v):
    eq, ek, ev = query.shape[-1], key.shape[-1], value.shape[-1]
    for name, w, shape in (("query", w_q, (eq, eq)), ("key", w_k, (eq, ek)), ("value", w_v, (eq, ev))):
        if tuple(w.shape) != shape:
            raise AssertionError(f"multi_head_attention_forward: expecting {name} weights shape of {shape}, but got "
                                 f"{tuple(w.shape)}")
    for name, b in (("query", b_q), ("key", b_k), ("value", b_v)):
        if b is not None and tuple(b.shape) != (eq,):
            raise AssertionError(f"multi_head_attention_forward: expecting {name} bias shape of {(eq,)}, but got "
                                 f"{tuple(b.shape)}")
    lin = _nnf().linear
    return lin(query, w_q, b_q), lin(key, w_k, b_k), lin(value, w_v, b_v)


def _nnf():
    """nn.functional itself: attention calls linear, softmax, bmm ... where PyTorch's code finds them, looked up at
    each call (FLOP counters such as ptflops replace F.linear or torch.bmm and count what attention calls)."""
    return sys.modules["gpumemnet.nn.functional"]


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """PyTorch's multi-head attention over sequence-first inputs (L, N, E) / (S, N, E), or unbatched (L, E):
    in-projection (packed in_proj_weight, or q/k/v_proj_weight), optional bias_k/bias_v and zero-attention rows,
    masks (bool: True is masked out; float: added), softmax(q k^T / sqrt(head_dim)) v per head, out-projection.
    Returns (output, weights averaged over heads or per head, or None without need_weights). PyTorch raises
    AssertionError for most bad shapes here, and so does this."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(t, "multi_head_attention_forward", name)
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("multi_head_attention_forward: need attn_mask if specifying the is_causal hint (it is "
                           "only a hint that attn_mask is causal); you may use "
                           "nn.Transformer.generate_square_subsequent_mask to create this mask")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # scaled_dot_product_attention builds the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is no longer causal
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"multi_head_attention_forward: was expecting embedding dimension of "
                             f"{embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"multi_head_attention_forward: embed_dim {embed_dim} not divisible by num_heads "
                             f"{num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"multi_head_attention_forward: key's sequence and batch dims "
                                 f"{tuple(key.shape[:2])} do not match value's {tuple(value.shape[:2])}")
        for name, w in (("q_proj_weight", q_proj_weight), ("k_proj_weight", k_proj_weight),
                        ("v_proj_weight", v_proj_weight)):
            if w is None:
                raise AssertionError(f"multi_head_attention_forward: use_separate_proj_weight is True but {name} "
                                     f"is None")
        b_q, b_k, b_v = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, b_q, b_k, b_v)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"multi_head_attention_forward: key shape {tuple(key.shape)} does not match value "
                                 f"shape {tuple(value.shape)}")
        if in_proj_weight is None:
            raise AssertionError("multi_head_attention_forward: use_separate_proj_weight is False but "
                                 "in_proj_weight is None")
        if query is key and key is value and tuple(in_proj_weight.shape) == (3 * embed_dim, embed_dim):
            # self-attention: one GEMM for q, k and v, as PyTorch's packed in-projection (three of a third the
            # width each cost a transformer layer's step 10-15 % more on the CPU)
            q, k, v = _nnf().linear(query, in_proj_weight, in_proj_bias).split(embed_dim, dim=-1)
        else:
            w_q, w_k, w_v = in_proj_weight.chunk(3)
            b_q, b_k, b_v = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
            q, k, v = _in_projection(query, key, value, w_q, w_k, w_v, b_q, b_k, b_v)

    if attn_mask is not None:  # made 3-D: (1 or N * num_heads, L, S)
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"multi_head_attention_forward: the shape of the 2D attn_mask is "
                                   f"{tuple(attn_mask.shape)}, but should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
            raise RuntimeError(f"multi_head_attention_forward: the shape of the 3D attn_mask is "
                               f"{tuple(attn_mask.shape)}, but should be {(bsz * num_heads, tgt_len, src_len)}.")
    if (bias_k is None) != (bias_v is None):
        raise AssertionError(f"multi_head_attention_forward: bias_{'k' if bias_v is None else 'v'} is set but "
                             f"bias_{'v' if bias_v is None else 'k'} is None")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError(f"multi_head_attention_forward: bias cannot be added to static "
                                 f"{'key' if static_k is not None else 'value'}.")
        k = cat([k, bias_k.repeat(1, bsz, 1)], 0)
        v = cat([v, bias_v.repeat(1, bsz, 1)], 0)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))

    # heads become batch entries: (N * num_heads, L or S, head_dim)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _static(static_k, "static_k", bsz * num_heads, head_dim) if static_k is not None else \
        k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = _static(static_v, "static_v", bsz * num_heads, head_dim) if static_v is not None else \
        v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        k = cat([k, zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype, device=k._device)], 1)
        v = cat([v, zeros(bsz * num_heads, 1, head_dim, dtype=v.dtype, device=v._device)], 1)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"multi_head_attention_forward: expected key_padding_mask of shape "
                                 f"{(bsz, src_len)} (batch, source length), got {tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len) \
            .reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0

    torch, nnf = sys.modules["gpumemnet"], _nnf()
    if need_weights:
        q = q * math.sqrt(1.0 / head_dim)
        scores = torch.bmm(q, k.transpose(-2, -1)) if attn_mask is None else \
            torch.baddbmm(attn_mask.expand(q.shape[0], tgt_len, src_len), q, k.transpose(-2, -1))
        weights = nnf.softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = nnf.dropout(weights, p=dropout_p)
        out = torch.bmm(weights, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = nnf.linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, out_proj_weight.shape[0])
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        attn_mask = attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else \
            attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = nnf.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = nnf.linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, out_proj_weight.shape[0])
    return (out if batched else out.squeeze(1)), None


def _static(t, name, rows, head_dim):
    if t.shape[0] != rows or t.shape[2] != head_dim:
        raise AssertionError(f"multi_head_attention_forward: expecting {name} of shape ({rows}, S, {head_dim}) "
                             f"(batch * num_heads, S, head_dim), but got {tuple(t.shape)}")
    return t


# ---- normalisations ----------------------------------------------------------------------------------------------
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """input / sqrt(mean(input^2 over the last len(normalized_shape) dims) + eps) * weight; eps defaults to the
    machine epsilon of input's dtype, as PyTorch's."""
    _check_tensor(input, "rms_norm")
    shape = _shape_tuple(normalized_shape)
    if not shape:
        raise RuntimeError("rms_norm: expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                           "least one element, but got normalized_shape = []")
    xs = tuple(input.shape)
    if input.ndim < len(shape) or xs[input.ndim - len(shape):] != shape:
        raise RuntimeError(f"rms_norm: given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size {list(xs)}")
    if weight is not None:
        _check_tensor(weight, "rms_norm", "weight")
        if tuple(weight.shape) != shape:
            raise RuntimeError(f"rms_norm: expected weight to be of same shape as normalized_shape, but got weight "
                               f"of shape {list(weight.shape)} and normalized_shape = {list(shape)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'rms_norm: "rms_norm" not implemented for {_name(input.dtype)} (floating point '
                                  f"input expected)")
    if eps is None:
        # torch.finfo(dtype).eps of the dtype it computes in: float32 for float16 / bfloat16 too, as PyTorch's
        eps = 2.220446049250313e-16 if input._dtype == 1 else 1.1920928955078125e-07
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    # float16 / bfloat16 normalise and scale in float32 and round once, as PyTorch (300 squared is inf in float16);
    # the result has the input's dtype whatever the weight's
    x = input.float() if input._dtype in (2, 3) else input
    out = x * ((x * x).mean(dim=dims, keepdim=True) + eps).rsqrt()
    return (out if weight is None else out * weight).to(input.dtype)


def _channel_window_sum(sq, before, after):
    """sum over channels c - before .. c + after (zero outside) of sq, along dim 1."""
    c = sq.shape[1]
    padded = pad(sq.movedim(1, -1), (before, after)).movedim(-1, 1)
    total = padded.narrow(1, 0, c)
    for j in range(1, before + after + 1):
        total = total + padded.narrow(1, j, c)
    return total


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of input^2 over the `size` channels around each one) ** beta (channels are dim 1;
    the window is zero-padded by size // 2 before and (size - 1) // 2 after, as PyTorch's)."""
    _check_tensor(input, "local_response_norm")
    if input.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3D or higher dimensionality input (got {input.ndim} "
                         f"dimensions)")
    if size <= 0:
        raise RuntimeError(f"local_response_norm: size must be greater than zero, got {size}")
    if input.numel() == 0:
        return input
    div = _channel_window_sum(input * input, size // 2, (size - 1) // 2) / size
    return input / (div * alpha + k).pow(beta)


class _CrossMapLRN2d(Function):
    """PyTorch's legacy CrossMapLRN2d, reproduced as it computes, so that values and gradients equal PyTorch's.
    With h = (size + 1) // 2: the forward's running window sums channels c - h + 1 .. c + h - 1 and, once that
    window has left it, channel 0 too (PyTorch's loop starts removing channels one step late); the hand-written
    backward sums its ratios over channels c - h .. c + size - 1 - h, not the forward's window."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        with no_grad():
            sq = x * x
            c = x.shape[1]
            h = (size + 1) // 2
            scale = _channel_window_sum(sq, h - 1, h - 1)
            late = tensor([float(i - h + 1 > 0) for i in range(c)], dtype=x.dtype, device=x._device)
            scale = scale + sq.narrow(1, 0, 1) * late.reshape(1, c, 1, 1)
            scale = scale * (alpha / size) + k
            out = scale.pow(-beta) * x
        ctx.save_for_backward(x, out, scale)
        ctx.args = (size, alpha, beta)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out, scale = ctx._unpacked
        size, alpha, beta = ctx.args
        ratio = g * out / scale
        h = (size + 1) // 2
        accum = _channel_window_sum(ratio, h, size - 1 - h)
        grad = scale.pow(-beta) * g - x * accum * (2 * alpha * beta / size)
        return grad, None, None, None, None


def _cross_map_lrn2d(input, size, alpha=1e-4, beta=0.75, k=1.0):
    _check_tensor(input, "CrossMapLRN2d")
    if input.ndim != 4:
        raise ValueError(f"CrossMapLRN2d: expected input to be 4D, got {input.ndim}D instead")
    return _CrossMapLRN2d.apply(input, size, alpha, beta, k)


# ---- bilinear ----------------------------------------------------------------------------------------------------
def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]."""
    for name, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        _check_tensor(t, "bilinear", name)
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D (out_features, in1_features, in2_features), got shape "
                           f"{tuple(weight.shape)}")
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    for i in range(input1.ndim - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {i}: got "
                               f"{input1.shape[i]} and {input2.shape[i]}")
    out_f, in1, in2 = weight.shape
    if input1.shape[-1] != in1:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but "
                           f"expected {in1}")
    if input2.shape[-1] != in2:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but "
                           f"expected {in2}")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_f):
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {tuple(bias.shape)} but "
                           f"expected ({out_f},)")
    # (..., in1) @ (in1, out * in2) -> (..., out, in2), then contracted with input2 over in2
    t = input1.matmul(weight.permute(1, 0, 2).reshape(in1, out_f * in2))
    t = t.reshape(tuple(input1.shape[:-1]) + (out_f, in2))
    y = (t * input2.unsqueeze(-2)).sum(-1)
    return y if bias is None else y + bias


# ---- activations -----------------------------------------------------------------------------------------------
def _rrelu_bounds(lower, upper):
    if lower > upper:
        raise RuntimeError(f"rrelu: lower bound should be less than or equal to the upper bound, got lower={lower} "
                           f"and upper={upper}")


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: in training each element x <= 0 is scaled by a slope drawn from U(lower, upper)
    (the global generator); in eval by the mean slope (lower + upper) / 2, i.e. leaky_relu."""
    _check_tensor(input, "rrelu")
    _rrelu_bounds(lower, upper)
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"rrelu: not implemented for {_name(input.dtype)} (floating point input expected)")
    slope = rand(*input.shape, dtype=input.dtype, device=input._device) * (upper - lower) + lower
    out = input.where(input > 0, input * slope)
    return _written(input, out, inplace)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    _check_tensor(input, "rrelu_")
    _rrelu_bounds(lower, upper)
    refuse_inplace(input, "rrelu_")
    return input.copy_(rrelu(input, lower, upper, training))


def _floating_inplace(input, op):
    _check_tensor(input, op)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"{op}: not implemented for {_name(input.dtype)} (floating point input expected)")
    refuse_inplace(input, op)


def celu_(input, alpha=1.0):
    """celu written into input (a tensor outside any graph: PyTorch records it, gpumemnet refuses it there)."""
    _floating_inplace(input, "celu_")
    if alpha == 0:
        raise RuntimeError("celu_: alpha cannot be 0 (it divides the input: ZeroDivisionError)")
    return input.copy_(celu(input, alpha))


def selu_(input):
    _floating_inplace(input, "selu_")
    return input.copy_(selu(input))


def threshold_(input, threshold, value):
    """input where input > threshold, value elsewhere, written into input (any dtype, as PyTorch's)."""
    _check_tensor(input, "threshold_")
    refuse_inplace(input, "threshold_")
    return input.masked_fill_(input <= threshold, value)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel(0, 1) noise) / tau) along dim; hard=True returns the one-hot of its argmax with the
    soft sample's gradient (straight-through). The noise comes from the global generator."""
    _check_tensor(logits, "gumbel_softmax", "logits")
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    if not logits.dtype.is_floating_point:
        raise RuntimeError(f"gumbel_softmax: the Gumbel noise is drawn from a continuous distribution: logits must "
                           f"be floating point, got {_name(logits.dtype)}")
    # -log(E), E ~ Exponential(1) = -log(U): U kept away from 0 so that E is finite and positive
    u = rand(*logits.shape, dtype=logits.dtype, device=logits._device).clamp(min=1e-20)
    gumbels = -((-u.log()).clamp(min=1e-30).log())
    y_soft = softmax((logits + gumbels) / tau, dim=dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim=dim, keepdim=True)
    y_hard = zeros(*logits.shape, dtype=logits.dtype, device=logits._device).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


# ---- distances ---------------------------------------------------------------------------------------------------
def pdist(input, p=2):
    """The p-norm distances between the rows of a 2-D input, pair (i, j) for i < j in row-major order
    (N * (N - 1) / 2 of them). A zero distance has gradient 0, as PyTorch's."""
    _check_tensor(input, "pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"pdist only supports floating-point dtypes, got {_name(input.dtype)}")
    if p < 0:
        raise RuntimeError(f"pdist only supports non-negative p values, got p={p}")
    n = input.shape[0]
    if n < 2:
        return input.narrow(0, 0, 0).sum(1)  # empty, and in the graph as PyTorch's
    i, j = triu_indices(n, n, 1, device=input._device)
    diff = input.index_select(0, i) - input.index_select(0, j)
    nonzero = diff.ne(0).any(dim=1, keepdim=True)
    dist = diff.where(nonzero, 1.0).norm(p, 1)  # the norm's gradient is undefined at 0: differentiate elsewhere
    if p == 0:  # a count of nonzeros: in PyTorch still part of the graph, with gradient 0
        dist = dist + diff.narrow(1, 0, 0).sum(1)  # exact zeros, in the graph
    return dist.where(nonzero.squeeze(1), 0.0)
