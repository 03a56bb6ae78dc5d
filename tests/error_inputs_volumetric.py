"""Error cases of the 3-D layers, the 5-D resizes and grid_sample / affine_grid: each B(...) is run against PyTorch
too (error_inputs.py explains it). No EXEMPT entries: every name here has a bad input."""
from error_inputs import B, z


def v(d, l, *shape, dtype="float32"):
    return z(d, l, *shape, dtype=dtype)


CONV = [
    B("F.conv3d of a 3-d input", lambda d, l: l.F.conv3d(v(d, l, 2, 4, 4), v(d, l, 1, 2, 1, 1, 1)), RuntimeError,
      r"conv3d: expected a 4-D \(C, D, H, W\) or 5-D .*got shape \(2, 4, 4\)"),
    B("F.conv3d of a 4-d weight", lambda d, l: l.F.conv3d(v(d, l, 1, 2, 4, 4, 4), v(d, l, 1, 2, 1, 1)),
      RuntimeError, r"conv3d: expected a 5-D weight, got shape \(1, 2, 1, 1\)"),
    B("F.conv3d channels mismatch", lambda d, l: l.F.conv3d(v(d, l, 1, 4, 3, 3, 3), v(d, l, 2, 3, 1, 1, 1)),
      RuntimeError, r"expects input with 3 channels, but got input of shape \(1, 4, 3, 3, 3\) with 4 channels"),
    B("F.conv3d kernel larger than input", lambda d, l: l.F.conv3d(v(d, l, 1, 1, 2, 4, 4), v(d, l, 1, 1, 3, 1, 1)),
      RuntimeError, r"conv3d: the kernel \(3, 1, 1\).*larger than the padded input size 2"),
    B("F.conv3d valid padding, kernel larger than input", lambda d, l: l.F.conv3d(v(d, l, 1, 1, 4, 2, 4),
      v(d, l, 1, 1, 1, 3, 1), padding="valid"), RuntimeError, r"spans 3 in dim 1, larger than the padded input "
      r"size 2"),
    B("F.conv3d same padding with stride", lambda d, l: l.F.conv3d(v(d, l, 1, 1, 4, 4, 4), v(d, l, 1, 1, 3, 3, 3),
      stride=2, padding="same"), RuntimeError, r"padding='same' is not supported for strided convolutions"),
    B("F.conv3d unknown padding string", lambda d, l: l.F.conv3d(v(d, l, 1, 1, 4, 4, 4), v(d, l, 1, 1, 3, 3, 3),
      padding="full"), RuntimeError, r"invalid padding string 'full'"),
    B("F.conv3d zero stride", lambda d, l: l.F.conv3d(v(d, l, 1, 1, 4, 4, 4), v(d, l, 1, 1, 3, 3, 3), stride=0),
      RuntimeError, r"conv3d: stride must be positive, got \(0, 0, 0\)"),
    B("F.conv3d negative padding", lambda d, l: l.F.conv3d(v(d, l, 1, 1, 4, 4, 4), v(d, l, 1, 1, 3, 3, 3),
      padding=-1), RuntimeError, r"conv3d: padding must be non-negative, got \(-1, -1, -1\)"),
    B("F.conv3d groups do not divide out channels", lambda d, l: l.F.conv3d(v(d, l, 1, 4, 4, 4, 4),
      v(d, l, 3, 2, 1, 1, 1), groups=2), RuntimeError, r"out_channels 3 .* divisible by groups=2"),
    B("F.conv_transpose3d of a 3-d input", lambda d, l: l.F.conv_transpose3d(v(d, l, 2, 4, 4),
      v(d, l, 2, 1, 1, 1, 1)), RuntimeError, r"conv_transpose3d: expected a 4-D .*got shape \(2, 4, 4\)"),
    B("F.conv_transpose3d channels mismatch", lambda d, l: l.F.conv_transpose3d(v(d, l, 1, 3, 2, 2, 2),
      v(d, l, 2, 1, 1, 1, 1)), RuntimeError, r"expects input with 2 channels.*\(1, 3, 2, 2, 2\)"),
    B("F.conv_transpose3d output_padding too large", lambda d, l: l.F.conv_transpose3d(v(d, l, 1, 2, 2, 2, 2),
      v(d, l, 2, 1, 1, 1, 1), stride=2, output_padding=2), RuntimeError,
      r"output padding must be smaller than either stride or dilation"),
    B("nn.Conv3d groups do not divide in_channels", lambda d, l: l.nn.Conv3d(3, 4, 3, groups=2, device=d),
      ValueError, r"in_channels \(3\) must be divisible by groups \(2\)"),
    B("nn.Conv3d unknown padding_mode", lambda d, l: l.nn.Conv3d(2, 4, 3, padding_mode="mirror", device=d),
      ValueError, r"padding_mode must be one of .*'mirror'"),
    B("nn.Conv3d same padding with stride", lambda d, l: l.nn.Conv3d(2, 4, 3, stride=2, padding="same", device=d),
      ValueError, r"padding='same' is not supported for strided convolutions"),
    B("nn.ConvTranspose3d reflect padding_mode", lambda d, l: l.nn.ConvTranspose3d(2, 4, 3, padding_mode="reflect",
      device=d), ValueError, r'Only "zeros" padding mode is supported for ConvTranspose3d'),
    B("nn.ConvTranspose3d output_size out of range", lambda d, l: l.nn.ConvTranspose3d(2, 2, 3, stride=2,
      device=d)(v(d, l, 1, 2, 2, 2, 2), output_size=(9, 5, 5)), ValueError,
      r"requested an output size of \(9, 5, 5\), but valid sizes range from \(5..6\)"),
]

POOL = [
    B("F.max_pool3d of a 3-d input", lambda d, l: l.F.max_pool3d(v(d, l, 2, 4, 4), 2), RuntimeError,
      r"max_pool3d: expected a 4-D .*got shape \(2, 4, 4\)"),
    B("F.max_pool3d padding over half the kernel", lambda d, l: l.F.max_pool3d(v(d, l, 1, 1, 4, 4, 4), 2,
      padding=2), RuntimeError, r"pad should be at most half of effective kernel size"),
    B("F.max_pool3d zero kernel", lambda d, l: l.F.max_pool3d(v(d, l, 1, 1, 4, 4, 4), (2, 0, 2)), RuntimeError,
      r"max_pool3d: kernel_size must be positive, got \(2, 0, 2\)"),
    B("F.max_pool3d output too small", lambda d, l: l.F.max_pool3d(v(d, l, 1, 1, 1, 4, 4), 2), RuntimeError,
      r"output size \(0, 2, 2\).*too small"),
    B("F.max_pool3d zero channels", lambda d, l: l.F.max_pool3d(v(d, l, 2, 0, 4, 4, 4), 2), RuntimeError,
      r"non-zero size for non-batch dimensions.*\(2, 0, 4, 4, 4\)"),
    B("F.adaptive_avg_pool3d output_size of 2", lambda d, l: l.F.adaptive_avg_pool3d(v(d, l, 1, 1, 4, 4, 4),
      (2, 2)), RuntimeError, r"output_size must be an int or a tuple of 3"),
    B("F.adaptive_max_pool3d negative output_size", lambda d, l: l.F.adaptive_max_pool3d(v(d, l, 1, 1, 4, 4, 4),
      -1), RuntimeError, r"output_size must be non-negative"),
    B("F.avg_pool3d of a 6-d input", lambda d, l: l.F.avg_pool3d(v(d, l, 1, 1, 1, 4, 4, 4), 2), RuntimeError,
      r"avg_pool3d: expected a 4-D .*got shape \(1, 1, 1, 4, 4, 4\)"),
    B("F.avg_pool3d zero divisor_override", lambda d, l: l.F.avg_pool3d(v(d, l, 1, 1, 4, 4, 4), 2,
      divisor_override=0), RuntimeError, r"divisor must be not zero"),
    B("F.adaptive_avg_pool3d of a 3-d input", lambda d, l: l.F.adaptive_avg_pool3d(v(d, l, 2, 4, 4), 2),
      RuntimeError, r"adaptive_avg_pool3d: expected a 4-D .*got shape \(2, 4, 4\)"),
    B("F.adaptive_max_pool3d of a 3-d input", lambda d, l: l.F.adaptive_max_pool3d(v(d, l, 2, 4, 4), 2),
      RuntimeError, r"adaptive_max_pool3d: expected a 4-D .*got shape \(2, 4, 4\)"),
    B("nn.MaxPool3d of a 3-d input", lambda d, l: l.nn.MaxPool3d(2)(v(d, l, 2, 4, 4)), RuntimeError,
      r"max_pool3d: expected a 4-D"),
    B("nn.AvgPool3d of a 3-d input", lambda d, l: l.nn.AvgPool3d(2)(v(d, l, 2, 4, 4)), RuntimeError,
      r"avg_pool3d: expected a 4-D"),
    B("nn.AdaptiveAvgPool3d of a 3-d input", lambda d, l: l.nn.AdaptiveAvgPool3d(2)(v(d, l, 2, 4, 4)),
      RuntimeError, r"adaptive_avg_pool3d: expected a 4-D"),
    B("nn.AdaptiveMaxPool3d of a 3-d input", lambda d, l: l.nn.AdaptiveMaxPool3d(2)(v(d, l, 2, 4, 4)),
      RuntimeError, r"adaptive_max_pool3d: expected a 4-D"),
]

GRID = [
    B("F.affine_grid int64 theta", lambda d, l: l.F.affine_grid(v(d, l, 1, 2, 3, dtype="int64"), [1, 1, 2, 2],
      align_corners=False), ValueError, r"Expected theta to have floating point type, but got .*int64"),
    B("F.affine_grid theta of the wrong shape", lambda d, l: l.F.affine_grid(v(d, l, 1, 3, 3), [1, 1, 2, 2],
      align_corners=False), ValueError, r"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
      r"\[1, 1, 2, 2\]. Got .*\(?\[?1, 3, 3"),
    B("F.affine_grid 3-d size", lambda d, l: l.F.affine_grid(v(d, l, 1, 2, 3), [1, 1, 2], align_corners=False),
      NotImplementedError, r"affine_grid only supports 4D and 5D sizes"),
    B("F.affine_grid empty size", lambda d, l: l.F.affine_grid(v(d, l, 1, 2, 3), [1, 1, 0, 2],
      align_corners=False), ValueError, r"Expected non-zero, positive output size. Got \[1, 1, 0, 2\]"),
    B("F.affine_grid batch differs from size", lambda d, l: l.F.affine_grid(v(d, l, 2, 2, 3), [1, 1, 2, 2],
      align_corners=False), RuntimeError, r"theta holds 2 matrices but size \[1, 1, 2, 2\] asks for a batch of 1"),
    B("F.grid_sample unknown mode", lambda d, l: l.F.grid_sample(v(d, l, 1, 1, 3, 3), v(d, l, 1, 2, 2, 2),
      mode="area", align_corners=False), ValueError, r"expected mode to be 'bilinear', 'nearest' or 'bicubic'"),
    B("F.grid_sample unknown padding_mode", lambda d, l: l.F.grid_sample(v(d, l, 1, 1, 3, 3), v(d, l, 1, 2, 2, 2),
      padding_mode="wrap", align_corners=False), ValueError, r"expected padding_mode to be 'zeros', 'border', or "
      r"'reflection', but got: 'wrap'"),
    B("F.grid_sample grid of 3 coordinates for a 4-d input", lambda d, l: l.F.grid_sample(v(d, l, 1, 1, 3, 3),
      v(d, l, 1, 2, 2, 3), align_corners=False), RuntimeError, r"size 2 in the last dimension.*\(1, 2, 2, 3\)"),
    B("F.grid_sample batch sizes differ", lambda d, l: l.F.grid_sample(v(d, l, 2, 1, 3, 3), v(d, l, 1, 2, 2, 2),
      align_corners=False), RuntimeError, r"expected grid and input to have same batch size"),
    B("F.grid_sample empty spatial dims", lambda d, l: l.F.grid_sample(v(d, l, 1, 1, 0, 3), v(d, l, 1, 2, 2, 2),
      align_corners=False), RuntimeError, r"expected input to have non-empty spatial dimensions"),
    B("F.grid_sample dtypes differ", lambda d, l: l.F.grid_sample(v(d, l, 1, 1, 3, 3), v(d, l, 1, 2, 2, 2,
      dtype="float64"), align_corners=False), RuntimeError, r"expected grid of the input's dtype .*float32"),
    B("F.grid_sample int64 input", lambda d, l: l.F.grid_sample(v(d, l, 1, 1, 3, 3, dtype="int64"),
      v(d, l, 1, 2, 2, 2, dtype="int64"), align_corners=False), NotImplementedError,
      r"input must be floating point, got .*int64"),
]

RESIZE = [
    B("F.interpolate trilinear of a 4-d input", lambda d, l: l.F.interpolate(v(d, l, 1, 1, 4, 4), scale_factor=2,
      mode="trilinear"), NotImplementedError, r"4-D input of shape .*, but trilinear mode needs a 5-D input"),
    B("F.interpolate bilinear of a 5-d input", lambda d, l: l.F.interpolate(v(d, l, 1, 1, 2, 4, 4), size=3,
      mode="bilinear"), NotImplementedError, r"5-D input of shape .*, but bilinear mode needs a 4-D input"),
    B("F.interpolate 5-d size of 2", lambda d, l: l.F.interpolate(v(d, l, 1, 1, 2, 4, 4), size=(3, 3)),
      ValueError, r"size must have one entry per spatial dimension \(3\)"),
]

CASES = CONV + POOL + GRID + RESIZE
EXEMPT = {}
