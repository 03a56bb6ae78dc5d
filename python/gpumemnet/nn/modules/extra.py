"""The layers over nn/_functional_extra.py (MultiheadAttention, RMSNorm, LocalResponseNorm, CrossMapLRN2d,
Bilinear, RReLU, LPPool, MaxUnpool, the margin losses, NLLLoss2d), with PyTorch's constructor arguments,
attribute and parameter names and initialisation; nn imports __all__."""
import math
import warnings

from .. import _functional_extra as FX
from .. import functional as F
from .. import init
from ..._core.autograd import no_grad
from ..parameter import Parameter
from ._utils import _pair, new_tensor
from .lazy import *  # noqa: F403 - the lazy modules and UninitializedParameter / UninitializedBuffer (lazy.py)
from .lazy import __all__ as _lazy_all
from .linear import Linear
from .loss import NLLLoss, _Loss, _WeightedLoss
from .module import Module
from .more import PairwiseDistance
from .pooling import _MaxUnpoolNd

__all__ = ["MultiheadAttention", "RMSNorm", "LocalResponseNorm", "CrossMapLRN2d", "Bilinear", "RReLU", "LPPool1d",
           "LPPool2d", "LPPool3d", "MaxUnpool1d", "MaxUnpool2d", "NLLLoss2d", "MultiMarginLoss", "MultiLabelMarginLoss",
           "TripletMarginWithDistanceLoss", "EmbeddingBag"] + _lazy_all


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's out_proj: a Linear under PyTorch's class name (its repr and type checks say so)."""


class MultiheadAttention(Module):
    """PyTorch's multi-head attention layer: parameters in_proj_weight (3E, E) and in_proj_bias (3E), or
    q_proj_weight / k_proj_weight / v_proj_weight when kdim or vdim differ from embed_dim, out_proj (a Linear),
    bias_k / bias_v (1, 1, E) with add_bias_kv; so a PyTorch state_dict loads as it is. Inputs are sequence-first
    (L, N, E) unless batch_first, or unbatched (L, E). forward returns (output, weights or None)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError(f"MultiheadAttention: embed_dim must be divisible by num_heads, got "
                                 f"embed_dim={embed_dim} and num_heads={num_heads}")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(new_tensor((embed_dim, embed_dim), device, dtype))
            self.k_proj_weight = Parameter(new_tensor((embed_dim, self.kdim), device, dtype))
            self.v_proj_weight = Parameter(new_tensor((embed_dim, self.vdim), device, dtype))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(new_tensor((3 * embed_dim, embed_dim), device, dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(new_tensor((3 * embed_dim,), device, dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(new_tensor((1, 1, embed_dim), device, dtype))
            self.bias_v = Parameter(new_tensor((1, 1, embed_dim), device, dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        # PyTorch's: Xavier-uniform projections, zero biases (out_proj.weight keeps Linear's init), Xavier-normal
        # bias_k / bias_v
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        key_padding_mask = FX._canonical_mask(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask",
                                              query.dtype)
        attn_mask = FX._canonical_mask(attn_mask, "attn_mask", None, "", query.dtype)
        if self.batch_first and batched:  # one transpose for self-attention, which keeps q, k, v one tensor
            query, key, value = (x.transpose(1, 0) for x in (query, key, value)) if query is not key or \
                key is not value else (query.transpose(1, 0),) * 3
        separate = not self._qkv_same_embed_dim
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=separate, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        return out, weights


class RMSNorm(Module):
    """x / sqrt(mean(x^2 over normalized_shape) + eps) * weight (weight initialised to ones; eps=None: the dtype's
    machine epsilon)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(new_tensor(self.normalized_shape, device, dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(LocalResponseNorm):
    """The legacy (Lua Torch) cross-channel LRN over 4-D input, with PyTorch's values and gradients (which differ
    from LocalResponseNorm's: see _functional_extra._CrossMapLRN2d)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__(size, alpha, beta, k)

    def forward(self, input):
        return FX._cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)


class Bilinear(Module):
    """y = x1^T A x2 + b: weight (out_features, in1_features, in2_features), bias (out_features), both
    U(-1/sqrt(in1_features), 1/sqrt(in1_features)) as PyTorch's."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(new_tensor((out_features, in1_features, in2_features), device, dtype))
        if bias:
            self.bias = Parameter(new_tensor((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class RReLU(Module):
    """Randomized leaky ReLU: random slopes in U(lower, upper) in training, their mean in eval."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class _LPPoolNd(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    def forward(self, input):
        return F.lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    def forward(self, input):
        return F.lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool3d(_LPPoolNd):
    def forward(self, input):
        return F.lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class MaxUnpool1d(_MaxUnpoolNd):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = (kernel_size,) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.stride = self.kernel_size if stride is None else (stride,) if isinstance(stride, int) else tuple(stride)
        self.padding = (padding,) if isinstance(padding, int) else tuple(padding)

    def forward(self, input, indices, output_size=None):
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = self.kernel_size if stride is None else _pair(stride, "stride")
        self.padding = _pair(padding, "padding")

    def forward(self, input, indices, output_size=None):
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class NLLLoss2d(NLLLoss):
    """PyTorch's old name of NLLLoss for (N, C, H, W) inputs (NLLLoss takes them too); deprecated, and warns so on
    construction as PyTorch's does."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement and see "
                      "https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for more details.", FutureWarning,
                      stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class MultiMarginLoss(_WeightedLoss):
    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 supported, got p={p}")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: weight must be one-dimensional, got shape {tuple(weight.shape)}")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             f"instead")
        self.distance_function = distance_function if distance_function is not None else PairwiseDistance()
        self.margin, self.swap = margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                   distance_function=self.distance_function, margin=self.margin,
                                                   swap=self.swap, reduction=self.reduction)


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of rows of weight (num_embeddings, embedding_dim), over F.embedding_bag;
    weight ~ N(0, 1) with the padding_idx row zeroed, as PyTorch's."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError(f"EmbeddingBag: padding_idx must be within num_embeddings ({num_embeddings}), "
                                     f"got {padding_idx}")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(new_tensor((num_embeddings, embedding_dim), device, dtype))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("EmbeddingBag: shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight)
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None and self.weight.device.type != "meta":
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings!r}, {self.embedding_dim!r}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        if embeddings.ndim != 2:
            raise AssertionError(f"EmbeddingBag.from_pretrained: embeddings parameter is expected to be "
                                 f"2-dimensional, got shape {tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
                  include_last_offset, padding_idx)
        bag.weight.requires_grad = not freeze
        return bag
