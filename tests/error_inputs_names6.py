"""Error cases of the PyTorch names added in stops 41 and 42 (nn.AdaptiveLogSoftmaxWithLoss, Tensor.set_,
segment_reduce, binomial):
B(...) is run against PyTorch too (error_inputs.py explains the tables). EXEMPT: public callables with no bad input."""
from error_inputs import B, z


def _asm(l, d):
    return l.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3, 6], device=d)


CASES = [
    B("Tensor.set_ of something that is not a tensor", lambda d, l: z(d, l, 2).set_([1.0, 2.0]), TypeError,
      r"argument 'source'"),
    B("AdaptiveLogSoftmaxWithLoss cutoffs not increasing",
      lambda d, l: l.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [6, 3]), ValueError,
      r"cutoffs should be a sequence of unique, positive integers sorted in an increasing order", devices=("cpu",)),
    B("AdaptiveLogSoftmaxWithLoss without cutoffs", lambda d, l: l.nn.AdaptiveLogSoftmaxWithLoss(4, 10, []),
      ValueError, r"cutoffs should be a sequence of length larger than 0", devices=("cpu",)),
    B("AdaptiveLogSoftmaxWithLoss a target past n_classes",
      lambda d, l: _asm(l, d)(z(d, l, 2, 4), l.L.tensor([1, 10], device=d)), RuntimeError,
      r"Target values should be in \[0, 9\]", devices=("cpu", "cuda")),  # (meta has no values to check)
    B("AdaptiveLogSoftmaxWithLoss a 2-D target", lambda d, l: _asm(l, d)(z(d, l, 2, 4), z(d, l, 2, 1, dtype="int64")),
      RuntimeError, r"0D or 1D target tensor expected, multi-target not supported"),
    B("segment_reduce with neither lengths nor offsets", lambda d, l: l.L.segment_reduce(z(d, l, 3), "sum"),
      RuntimeError, r"Either lengths or offsets must be defined", devices=("cpu", "cuda")),
    B("segment_reduce of lengths not summing to the axis",
      lambda d, l: l.L.segment_reduce(z(d, l, 3), "max", lengths=l.L.tensor([1, 1], device=d)), RuntimeError,
      r"Expected all rows of lengths along axis to sum to data.size", devices=("cpu", "cuda")),
    B("binomial of an integer count", lambda d, l: l.L.binomial(z(d, l, 2, dtype="int64"), z(d, l, 2)), ValueError,
      r"binomial only supports floating-point dtypes for count, got: Long", devices=("cpu",)),
    B("as_strided_scatter of a src not the view's shape",
      lambda d, l: l.L.as_strided_scatter(z(d, l, 3, 4), z(d, l, 3), (2, 2), (4, 1)), RuntimeError,
      r"expected src to have a size equal to the slice of self. src size = \[3\], slice size = \[2, 2\]"),
    B("Tensor.as_strided_scatter past the storage's end",
      lambda d, l: z(d, l, 3, 4).as_strided_scatter(z(d, l, 2, 2), (2, 2), (4, 1), 20), RuntimeError,
      r"setStorage: sizes \[2, 2\], strides \[4, 1\], storage offset 20"),
    B("igamma of integer tensors", lambda d, l: l.L.igamma(z(d, l, 2, dtype="int64"), z(d, l, 2, dtype="int64")),
      NotImplementedError, r"not implemented for 'Long'", devices=("cpu",)),
    B("igamma with a number as other", lambda d, l: l.L.igamma(z(d, l, 2), 2.0), TypeError,
      r"argument 'other' \(position 2\) must be Tensor, not float"),
    B("Tensor.igamma of shapes that do not broadcast", lambda d, l: z(d, l, 2).igamma(z(d, l, 1, 3)), RuntimeError,
      r"size|broadcast"),
    B("Tensor.igammac of shapes that do not broadcast", lambda d, l: z(d, l, 2).igammac(z(d, l, 1, 3)),
      RuntimeError, r"size|broadcast"),
    B("igammac of integer tensors", lambda d, l: l.L.igammac(z(d, l, 2, dtype="int64"), z(d, l, 2, dtype="int64")),
      NotImplementedError, r"not implemented for 'Long'", devices=("cpu",)),
    B("LazyConv3d on a 3-D input", lambda d, l: l.nn.LazyConv3d(4, 3)(z(d, l, 2, 3, 4)), RuntimeError,
      r"Expected 4D \(unbatched\) or 5D \(batched\) input to LazyConv3d", devices=("cpu",)),
    B("LazyConvTranspose3d on a 3-D input", lambda d, l: l.nn.LazyConvTranspose3d(4, 2)(z(d, l, 2, 3, 4)),
      RuntimeError, r"Expected 4D \(unbatched\) or 5D \(batched\) input to LazyConvTranspose3d", devices=("cpu",)),
    B("LPPool3d of norm_type 0", lambda d, l: l.nn.LPPool3d(0, 2)(z(d, l, 1, 2, 4, 4, 4)), ValueError,
      r"norm_type must be a non-zero value, but got 0"),
    B("lp_pool3d of norm_type 0", lambda d, l: l.nn.functional.lp_pool3d(z(d, l, 1, 2, 4, 4, 4), 0.0, 2),
      ValueError, r"norm_type must be a non-zero value, but got 0"),
    B("conv_tbc of a 2-D input", lambda d, l: l.L.conv_tbc(z(d, l, 5, 2), z(d, l, 3, 2, 4), z(d, l, 4)), RuntimeError,
      r"Input must have 3 dims: time, batch, in_channel"),
    B("orgqr of a wide matrix", lambda d, l: l.L.orgqr(z(d, l, 3, 4), z(d, l, 2)), RuntimeError,
      r"input.shape\[-2\] must be greater than or equal to input.shape\[-1\]"),
    B("ormqr of other with the wrong rows", lambda d, l: l.L.ormqr(z(d, l, 4, 3), z(d, l, 3), z(d, l, 3, 2)),
      RuntimeError, r"other.shape\[-2\] must be equal to input.shape\[-2\]"),
]
_COPY = "a conversion valid for every tensor (to a complex dtype)"
EXEMPT = {"Tensor.cfloat": _COPY, "Tensor.cdouble": _COPY, "Tensor.chalf": _COPY}
