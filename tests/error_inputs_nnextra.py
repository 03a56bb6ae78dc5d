"""Error cases of nn/_functional_extra*.py and nn/modules/extra.py, lazy.py: B(...) is run against PyTorch too, E(...)
names something PyTorch has not (error_inputs.py explains both). EXEMPT: public callables with no bad input, each
with its reason (test_error_coverage.py)."""
from error_inputs import GM, HOST, B, ErrorInput, ix, z  # noqa: F401
from error_inputs_api import E  # noqa: F401


def _mha_args(d, l, *shape):
    """query, key, value, embed_dim, num_heads, in_proj_weight ... out_proj_bias of a 4-wide, 2-head attention."""
    q = z(d, l, *shape)
    return (q, q, q, 4, 2, z(d, l, 12, 4), None, None, None, False, 0.0, z(d, l, 4, 4), None)


def _unpool_idx(d, l, *shape):
    return l.L.zeros(shape, dtype=l.L.int64, device=d)


FUNCTIONAL = [
    B("multi_head_attention_forward 4-D query", lambda d, l: l.F.multi_head_attention_forward(
      *_mha_args(d, l, 1, 2, 3, 4)), AssertionError,
      r"query should be unbatched 2D or batched 3D tensor but received 4-D query tensor"),
    B("multi_head_attention_forward attn_mask of the wrong size", lambda d, l: l.F.multi_head_attention_forward(
      *_mha_args(d, l, 3, 1, 4), attn_mask=z(d, l, 2, 2)), RuntimeError,
      r"shape of the 2D attn_mask is \(2, 2\), but should be \(3, 3\)"),
    B("multi_head_attention_forward int attn_mask", lambda d, l: l.F.multi_head_attention_forward(
      *_mha_args(d, l, 3, 1, 4), attn_mask=z(d, l, 3, 3, dtype="int64")), AssertionError,
      r"only bool and floating types of attn_mask"),
    B("rms_norm shape does not end the input", lambda d, l: l.F.rms_norm(z(d, l, 2, 3, 4), (5,)), RuntimeError,
      r"rms_norm: given normalized_shape=\[5\], expected input with shape \[\*, 5\], but got input of size "
      r"\[2, 3, 4\]"),
    B("local_response_norm rank-2 input", lambda d, l: l.F.local_response_norm(z(d, l, 2, 3), 2), ValueError,
      r"expected 3D or higher dimensionality input \(got 2 dimensions\)"),
    B("bilinear input2 features differ from weight", lambda d, l: l.F.bilinear(z(d, l, 2, 3), z(d, l, 2, 4),
      z(d, l, 5, 3, 3)), RuntimeError, r"input2 size does not match weight size: got 4 but expected 3"),
    B("bilinear batch sizes differ", lambda d, l: l.F.bilinear(z(d, l, 2, 3), z(d, l, 3, 4), z(d, l, 5, 3, 4)),
      RuntimeError, r"batch dimensions do not match at dim 0: got 2 and 3"),
    B("rrelu lower above upper", lambda d, l: l.F.rrelu(z(d, l, 3), 0.5, 0.1, training=True), RuntimeError,
      r"lower bound should be less than or equal to the upper bound, got lower=0.5 and upper=0.1"),
    B("rrelu_ lower above upper", lambda d, l: l.F.rrelu_(z(d, l, 3), 0.5, 0.1), RuntimeError,
      r"lower bound should be less than or equal to the upper bound"),
    B("celu_ zero alpha", lambda d, l: l.F.celu_(z(d, l, 3), 0.0), RuntimeError, r"celu_: alpha cannot be 0"),
    B("selu_ of a leaf that requires grad", lambda d, l: l.F.selu_(z(d, l, 3).requires_grad_()), RuntimeError,
      r"selu_: a leaf tensor that requires grad cannot be modified in place"),
    B("threshold_ of a leaf that requires grad", lambda d, l: l.F.threshold_(z(d, l, 3).requires_grad_(), 0.0, 1.0),
      RuntimeError, r"threshold_: a leaf tensor that requires grad cannot be modified in place"),
    B("gumbel_softmax of int64 logits", lambda d, l: l.F.gumbel_softmax(z(d, l, 3, dtype="int64")), RuntimeError,
      r"logits must be floating point, got int64"),
    B("pdist rank-3 input", lambda d, l: l.F.pdist(z(d, l, 3, 3, 3)), RuntimeError,
      r"pdist only supports 2D tensors, got: 3D"),
    B("pdist negative p", lambda d, l: l.F.pdist(z(d, l, 3, 3), p=-1), RuntimeError,
      r"pdist only supports non-negative p values, got p=-1"),
    B("lp_pool1d zero norm_type", lambda d, l: l.F.lp_pool1d(z(d, l, 1, 1, 4), 0, 2), ValueError,
      r"norm_type must be a non-zero value, but got 0"),
    B("lp_pool2d zero norm_type", lambda d, l: l.F.lp_pool2d(z(d, l, 1, 1, 4, 4), 0, 2), ValueError,
      r"norm_type must be a non-zero value, but got 0"),
    B("max_pool1d_with_indices rank-5 input", lambda d, l: l.F.max_pool1d_with_indices(z(d, l, 1, 1, 4, 4, 4), 2),
      RuntimeError, r"max_pool1d: expected a 2-D \(C, L\) or 3-D \(N, C, L\) input"),
    B("max_pool2d_with_indices rank-2 input", lambda d, l: l.F.max_pool2d_with_indices(z(d, l, 4, 4), 2),
      ValueError, r"max_pool2d: expected input of 3 dimensions .* got shape \(4, 4\)"),
    B("max_unpool2d output_size out of range", lambda d, l: l.F.max_unpool2d(z(d, l, 1, 1, 2, 2),
      _unpool_idx(d, l, 1, 1, 2, 2), 2, output_size=(7, 7)), ValueError,
      r'invalid output_size "\(7, 7\)" \(dim 0 must be between 2 and 6\)'),
    B("max_unpool2d index out of range", lambda d, l: l.F.max_unpool2d(z(d, l, 1, 1, 2, 2),
      ix(d, l, [[[[0, 1], [2, 20]]]]), 2), RuntimeError, r"invalid max index: 20 \(output volumes are of size 4x4\)",
      devices=HOST),
    B("max_unpool2d indices of another shape", lambda d, l: l.F.max_unpool2d(z(d, l, 1, 1, 2, 2),
      _unpool_idx(d, l, 1, 1, 1, 3), 2), RuntimeError, r"expected shape of indices to be same as that of the input "
      r"tensor \(\[1, 1, 2, 2\]\) but got indices tensor with shape: \[1, 1, 1, 3\]"),
    B("max_unpool1d output_size of the wrong length", lambda d, l: l.F.max_unpool1d(z(d, l, 1, 1, 2),
      _unpool_idx(d, l, 1, 1, 2), 2, output_size=[1, 5]), ValueError,
      r"output_size should be a sequence containing 1 or 3 elements, but it has a length of '2'"),
    B("upsample with both size and scale_factor", lambda d, l: l.F.upsample(z(d, l, 1, 1, 2, 2), size=4,
      scale_factor=2), ValueError, r"only one of size or scale_factor should be defined"),
    B("upsample_nearest with neither size nor scale_factor", lambda d, l: l.F.upsample_nearest(z(d, l, 1, 1, 2, 2)),
      ValueError, r"either size or scale_factor should be defined"),
    B("upsample_bilinear with neither size nor scale_factor",
      lambda d, l: l.F.upsample_bilinear(z(d, l, 1, 1, 2, 2)), ValueError,
      r"either size or scale_factor should be defined"),
    B("multi_margin_loss p=3", lambda d, l: l.F.multi_margin_loss(z(d, l, 2, 3), z(d, l, 2, dtype="int64"), p=3),
      ValueError, r"only p == 1 and p == 2 supported, got p=3"),
    B("multi_margin_loss batch sizes differ", lambda d, l: l.F.multi_margin_loss(z(d, l, 2, 3),
      z(d, l, 1, dtype="int64")), RuntimeError, r"Expected target size \[2\], but got \[1\]"),
    B("multi_margin_loss class index out of range", lambda d, l: l.F.multi_margin_loss(z(d, l, 2, 3),
      ix(d, l, [0, 3])), RuntimeError, r"target out of range: every target must be in \[0, 3\), got 3", devices=HOST),
    B("multilabel_margin_loss target of another shape", lambda d, l: l.F.multilabel_margin_loss(z(d, l, 2, 3),
      z(d, l, 2, 2, dtype="int64")), RuntimeError, r"inconsistent target size: \[2, 2\] for input of size: \[2, 3\]"),
    B("multilabel_margin_loss float targets", lambda d, l: l.F.multilabel_margin_loss(z(d, l, 2, 3), z(d, l, 2, 3)),
      RuntimeError, r"expected scalar type Long but found float32"),
    B("embedding_bag 2-D input with offsets", lambda d, l: l.F.embedding_bag(ix(d, l, [[0, 1]]), z(d, l, 3, 2),
      ix(d, l, [0])), ValueError, r"if input is 2D, then offsets has to be None"),
    B("embedding_bag index out of range", lambda d, l: l.F.embedding_bag(ix(d, l, [0, 9]), z(d, l, 6, 2),
      ix(d, l, [0])), RuntimeError, r"index 1 of input takes value 9 which is not in the valid range \[0, 6\)",
      devices=HOST),
    B("embedding_bag first offset not 0", lambda d, l: l.F.embedding_bag(ix(d, l, [0, 1, 2]), z(d, l, 6, 2),
      ix(d, l, [1, 2])), RuntimeError, r"offsets\[0\] has to be 0", devices=HOST),
    B("embedding_bag per_sample_weights in mean mode", lambda d, l: l.F.embedding_bag(ix(d, l, [[0, 1]]),
      z(d, l, 3, 2), per_sample_weights=z(d, l, 1, 2)), NotImplementedError,
      r"per_sample_weights is only supported for mode='sum' \(got mode='mean'\)"),
    B("triplet_margin_with_distance_loss zero margin", lambda d, l: l.F.triplet_margin_with_distance_loss(
      z(d, l, 2, 3), z(d, l, 2, 3), z(d, l, 2, 3), margin=0), ValueError, r"margin must be greater than 0, got 0"),
    B("triplet_margin_with_distance_loss ranks differ", lambda d, l: l.F.triplet_margin_with_distance_loss(
      z(d, l, 2, 3), z(d, l, 3), z(d, l, 2, 3)), RuntimeError, r"anchor 2D, positive 1D, and negative 2D inputs"),
]

LAYERS = [
    B("MultiheadAttention zero heads", lambda d, l: l.nn.MultiheadAttention(4, 0), ValueError,
      r"embed_dim and num_heads must be greater than 0, got embed_dim=4 and num_heads=0"),
    B("MultiheadAttention embed_dim of the input differs", lambda d, l: l.nn.MultiheadAttention(4, 2, device=d)(
      z(d, l, 3, 1, 6), z(d, l, 3, 1, 6), z(d, l, 3, 1, 6)), AssertionError,
      r"was expecting embedding dimension of 4, but got 6"),
    B("RMSNorm shape does not end the input", lambda d, l: l.nn.RMSNorm(5, device=d)(z(d, l, 2, 4)), RuntimeError,
      r"normalized_shape=\[5\], expected input with shape \[\*, 5\]"),
    B("LocalResponseNorm rank-2 input", lambda d, l: l.nn.LocalResponseNorm(2)(z(d, l, 2, 3)), ValueError,
      r"expected 3D or higher dimensionality input"),
    B("CrossMapLRN2d rank-3 input", lambda d, l: l.nn.CrossMapLRN2d(3)(z(d, l, 2, 3, 4)), ValueError,
      r"CrossMapLRN2d: expected input to be 4D, got 3D instead"),
    B("Bilinear input1 features differ", lambda d, l: l.nn.Bilinear(3, 4, 5, device=d)(z(d, l, 2, 2), z(d, l, 2, 4)),
      RuntimeError, r"input1 size does not match weight size: got 2 but expected 3"),
    B("RReLU lower above upper", lambda d, l: l.nn.RReLU(0.5, 0.1)(z(d, l, 3)), RuntimeError,
      r"lower bound should be less than or equal to the upper bound"),
    B("LPPool1d zero norm_type", lambda d, l: l.nn.LPPool1d(0, 2)(z(d, l, 1, 1, 4)), ValueError,
      r"norm_type must be a non-zero value"),
    B("LPPool2d zero norm_type", lambda d, l: l.nn.LPPool2d(0, 2)(z(d, l, 1, 1, 4, 4)), ValueError,
      r"norm_type must be a non-zero value"),
    B("MaxUnpool1d float indices", lambda d, l: l.nn.MaxUnpool1d(2)(z(d, l, 1, 1, 2), z(d, l, 1, 1, 2)),
      RuntimeError, r"elements in indices should be type int64 but got: .*float32"),
    B("MaxUnpool2d float indices", lambda d, l: l.nn.MaxUnpool2d(2)(z(d, l, 1, 1, 2, 2), z(d, l, 1, 1, 2, 2)),
      RuntimeError, r"elements in indices should be type int64 but got: .*float32"),
    B("NLLLoss2d class index out of range", lambda d, l: l.nn.NLLLoss2d()(z(d, l, 2, 3), ix(d, l, [0, 7])),
      IndexError, r"target 7 is out of bounds for 3 classes", devices=HOST),
    B("MultiMarginLoss p=3", lambda d, l: l.nn.MultiMarginLoss(p=3)(z(d, l, 2, 3), z(d, l, 2, dtype="int64")),
      ValueError, r"only p == 1 and p == 2 supported"),
    B("MultiLabelMarginLoss target of another shape", lambda d, l: l.nn.MultiLabelMarginLoss()(z(d, l, 2, 3),
      z(d, l, 2, 2, dtype="int64")), RuntimeError, r"inconsistent target size"),
    B("EmbeddingBag unknown mode", lambda d, l: l.nn.EmbeddingBag(5, 2, mode="median", device=d)(
      ix(d, l, [[0, 1]])), ValueError, r"mode has to be one of sum, mean or max, got 'median'"),
    B("TripletMarginWithDistanceLoss ranks differ", lambda d, l: l.nn.TripletMarginWithDistanceLoss()(
      z(d, l, 2, 3), z(d, l, 3), z(d, l, 2, 3)), RuntimeError, r"anchor 2D, positive 1D, and negative 2D inputs"),
]

LAZY = [
    B("UninitializedParameter of int64 that requires grad", lambda d, l: l.nn.UninitializedParameter(device=d,
      dtype=l.L.int64), RuntimeError, r"floating point"),
    B("UninitializedBuffer of int64 that requires grad", lambda d, l: l.nn.UninitializedBuffer(True, device=d,
      dtype=l.L.int64), RuntimeError, r"floating point"),
    B("LazyLinear 0-d input", lambda d, l: l.nn.LazyLinear(3, device=d)(z(d, l)), IndexError,
      r"LazyLinear: cannot infer in_features from a 0-d input"),
    B("LazyConv1d groups do not divide the input channels", lambda d, l: l.nn.LazyConv1d(4, 3, groups=2, device=d)(
      z(d, l, 1, 3, 5)), ValueError, r"in_channels must be divisible by groups, got in_channels=3 and groups=2"),
    B("LazyConv2d rank-2 input", lambda d, l: l.nn.LazyConv2d(4, 3, device=d)(z(d, l, 5, 5)), RuntimeError,
      r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d, but got input of size: \[5, 5\]"),
    B("LazyConvTranspose1d groups do not divide the input channels", lambda d, l: l.nn.LazyConvTranspose1d(
      4, 3, groups=2, device=d)(z(d, l, 1, 3, 5)), ValueError, r"in_channels must be divisible by groups"),
    B("LazyConvTranspose2d rank-5 input", lambda d, l: l.nn.LazyConvTranspose2d(4, 3, device=d)(
      z(d, l, 1, 1, 3, 5, 5)), RuntimeError, r"Expected 3D \(unbatched\) or 4D \(batched\) input"),
    B("LazyBatchNorm1d rank-4 input", lambda d, l: l.nn.LazyBatchNorm1d(device=d)(z(d, l, 2, 3, 4, 5)), ValueError,
      r"expected 2D or 3D input \(got 4D input"),
    B("LazyBatchNorm2d rank-2 input", lambda d, l: l.nn.LazyBatchNorm2d(device=d)(z(d, l, 2, 3)), ValueError,
      r"expected 4D input \(got 2D input"),
    B("LazyBatchNorm3d rank-4 input", lambda d, l: l.nn.LazyBatchNorm3d(device=d)(z(d, l, 2, 3, 4, 5)), ValueError,
      r"expected 5D input \(got 4D input"),
    B("LazyInstanceNorm1d rank-4 input", lambda d, l: l.nn.LazyInstanceNorm1d(device=d)(z(d, l, 2, 3, 4, 5)),
      ValueError, r"expected 2D or 3D input \(got 4D input"),
    B("LazyInstanceNorm2d rank-2 input", lambda d, l: l.nn.LazyInstanceNorm2d(device=d)(z(d, l, 2, 3)),
      ValueError, r"expected 3D or 4D input \(got 2D input"),
    B("LazyInstanceNorm3d rank-3 input", lambda d, l: l.nn.LazyInstanceNorm3d(device=d)(z(d, l, 2, 3, 4)),
      ValueError, r"expected 4D or 5D input \(got 3D input"),
]

CASES = FUNCTIONAL + LAYERS + LAZY
EXEMPT = {}
