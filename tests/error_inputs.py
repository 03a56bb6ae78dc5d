"""One table of bad inputs for the public ops (PyTorch's OpInfo `error_inputs`): each case builds its tensors on
the device it is given, calls the op, and names the exception type and a pattern of its message. test_error_inputs.py
runs every case on the CPU, on meta and (when available, the emulator included) on CUDA, and checks that each
device raises the same thing: a program checked on meta fails there exactly as it would on the CPU or the GPU.

A case is ErrorInput(name, call, exc, pattern) where call(dev) performs the bad call. Add a case beside its op's
group when an op gains an argument check.

The groups after INDEX are written once for both libraries: call(dev, lib) with lib = GM or TORCH (L, F, nn), so
test_error_inputs.py also checks that PyTorch refuses the same call (gpumemnet refuses nothing PyTorch accepts),
and that the type gpumemnet raises is caught by the `except` a PyTorch user writes (gm.ArgumentError is both a
ValueError and a RuntimeError); the few that differ are recorded with the reason: ERROR_TYPES_DIFFER.
error_inputs_api.py adds the families that reach every other public callable (test_error_coverage.py). A check that needs the tensor's values (a
class index, an embedding index) cannot run on meta, which has no data: such cases name their devices."""
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable, Optional, Tuple

import gpumemnet as gm
import gpumemnet.nn.functional as F


@dataclass(frozen=True)
class ErrorInput:
    name: str
    call: Callable
    exc: type
    pattern: str
    both: bool = False                       # call(dev, lib): also run against PyTorch
    devices: Optional[Tuple[str, ...]] = None  # None: every device; else those (data-dependent checks skip meta)


def Z(dev, *shape, dtype=gm.float32):
    return gm.zeros(*shape, dtype=dtype, device=dev)


HUGE = 2 ** 62

CONV = [
    ErrorInput("conv2d padding overflows int64", lambda d: F.conv2d(Z(d, 1, 1, 4, 4), Z(d, 1, 1, 3, 3), padding=HUGE),
               ValueError, r"conv2d: padding \(4611686018427387904, .*too large.*64 bits"),
    ErrorInput("conv2d dilation overflows int64",
               lambda d: F.conv2d(Z(d, 1, 1, 4, 4), Z(d, 1, 1, 3, 3), dilation=HUGE), ValueError,
               r"conv2d: .*dilation \(4611686018427387904, 4611686018427387904\) is too large"),
    ErrorInput("conv_transpose2d stride overflows int64",
               lambda d: F.conv_transpose2d(Z(d, 1, 1, 4, 4), Z(d, 1, 1, 3, 3), stride=HUGE), ValueError,
               r"conv_transpose2d: stride \(4611686018427387904, .*output size would not fit in 64 bits"),
    ErrorInput("conv2d float32 input, float16 weight", lambda d: F.conv2d(Z(d, 1, 2, 4, 4),
               Z(d, 3, 2, 3, 3, dtype=gm.float16)), TypeError, r"conv2d: input has dtype float32 but weight has "
               r"dtype float16"),
    ErrorInput("conv2d float32 input, bfloat16 bias", lambda d: F.conv2d(Z(d, 1, 2, 4, 4), Z(d, 3, 2, 3, 3),
               Z(d, 3, dtype=gm.bfloat16)), TypeError, r"bias has dtype bfloat16"),
    ErrorInput("conv2d kernel larger than input", lambda d: F.conv2d(Z(d, 1, 1, 2, 2), Z(d, 1, 1, 3, 3)),
               ValueError, r"spans 3x3, larger than the padded input 2x2"),
    ErrorInput("conv2d zero-height input", lambda d: F.conv2d(Z(d, 1, 2, 0, 4), Z(d, 3, 2, 1, 1), padding=1),
               ValueError, r"height and width must be at least 1, got input of shape \(1, 2, 0, 4\)"),
    ErrorInput("conv2d weight with no output channel", lambda d: F.conv2d(Z(d, 1, 2, 4, 4), Z(d, 0, 2, 1, 1)),
               ValueError, r"at least 1 output channel, got weight of shape \(0, 2, 1, 1\)"),
    ErrorInput("conv2d negative stride", lambda d: F.conv2d(Z(d, 1, 1, 4, 4), Z(d, 1, 1, 3, 3), stride=-1),
               ValueError, r"conv2d: stride must be positive, got \(-1, -1\)"),
    ErrorInput("conv2d groups do not divide channels", lambda d: F.conv2d(Z(d, 1, 3, 4, 4), Z(d, 2, 1, 3, 3),
               groups=2), ValueError, r"input channels 3 .* not divisible by groups=2"),
    ErrorInput("conv2d channels mismatch", lambda d: F.conv2d(Z(d, 1, 4, 4, 4), Z(d, 2, 3, 3, 3)), ValueError,
               r"expects input with 3 channels, but got input \(1, 4, 4, 4\) with 4 channels"),
    ErrorInput("conv2d int64 input", lambda d: F.conv2d(Z(d, 1, 3, 4, 4, dtype=gm.int64), Z(d, 2, 3, 3, 3)),
               TypeError, r"input must be floating point, got int64"),
    ErrorInput("conv2d rank-2 input", lambda d: F.conv2d(Z(d, 4, 4), Z(d, 2, 3, 3, 3)), ValueError,
               r"expected a 3-D \(C, H, W\) or 4-D"),
]

LINEAR = [
    ErrorInput("linear float32 input, bfloat16 weight", lambda d: F.linear(Z(d, 2, 3), Z(d, 4, 3, dtype=gm.bfloat16)),
               TypeError, r"linear: input has dtype float32 but weight has dtype bfloat16"),
    ErrorInput("linear in_features mismatch", lambda d: F.linear(Z(d, 2, 3), Z(d, 4, 5)), ValueError,
               r"input \(2, 3\) has 3 features .* weight \(4, 5\) .* expects 5"),
]

MATMUL = [
    ErrorInput("matmul inner sizes differ", lambda d: Z(d, 2, 3) @ Z(d, 4, 5), ValueError,
               r"matmul: shapes \(2, 3\) and \(4, 5\): inner dimensions 3 and 4 differ"),
]

SHAPES = [
    ErrorInput("add shapes do not broadcast", lambda d: Z(d, 2, 3) + Z(d, 4), ValueError,
               r"shapes \(2, 3\) and \(4,\) cannot be broadcast"),
    ErrorInput("view to a different element count", lambda d: Z(d, 2, 3).view(4, 2), ValueError,
               r"cannot view a tensor of shape \(2, 3\) as \(4, 2\)"),
    ErrorInput("negative size", lambda d: Z(d, 2, -1), ValueError,
               r"sizes must be non-negative, got -1 in dimension 1"),
    ErrorInput("size whose bytes overflow 64 bits", lambda d: Z(d, 2 ** 40, 2 ** 40), ValueError,
               r"number of elements of shape \(1099511627776, 1099511627776\) overflows 64 bits"),
]

LOSSES = [
    ErrorInput("cross_entropy float class indices", lambda d: F.cross_entropy(Z(d, 2, 3), Z(d, 2)), TypeError,
               r"target must be an int64 tensor of class indices, got float32"),
    ErrorInput("mse_loss shapes that do not broadcast", lambda d: F.mse_loss(Z(d, 2, 3), Z(d, 3, 2)), ValueError,
               r"mse_loss: the size of input \(2, 3\) and of target \(3, 2\) cannot be broadcast together"),
]

POOL = [
    ErrorInput("max_pool2d kernel larger than padded input", lambda d: F.max_pool2d(Z(d, 1, 1, 2, 2), 3), ValueError,
               r"kernel is larger than the padded input"),
    ErrorInput("max_pool2d zero kernel", lambda d: F.max_pool2d(Z(d, 1, 1, 4, 4), 0), ValueError,
               r"kernel_size must be positive, got \(0, 0\)"),
]

NORM = [
    ErrorInput("batch_norm negative eps in training", lambda d: F.batch_norm(Z(d, 2, 3, 4, 4), Z(d, 3), Z(d, 3),
               training=True, eps=-1.0), ValueError, r"batch_norm eps must be positive during training, but got -1.0"),
    ErrorInput("batch_norm zero eps in training", lambda d: F.batch_norm(Z(d, 2, 3, 4, 4), Z(d, 3), Z(d, 3),
               training=True, eps=0.0), ValueError, r"eps must be positive during training, but got 0.0"),
]

DTYPES = [
    ErrorInput("int64 to a negative int power", lambda d: Z(d, 3, dtype=gm.int64) ** -1, RuntimeError,
               r"Integers to negative integer powers are not allowed"),
    ErrorInput("bool to a negative int power", lambda d: Z(d, 3, dtype=gm.bool) ** -2, RuntimeError,
               r"Integers to negative integer powers are not allowed"),
]

INDEX = [
    ErrorInput("list index out of range", lambda d: Z(d, 3)[[0, 5]], IndexError,
               r"index 5 is out of bounds for dimension 0 with size 3"),
    ErrorInput("negative list index out of range", lambda d: Z(d, 3, 3)[:, [0, -4]], IndexError,
               r"index -4 is out of bounds for dimension 1 with size 3"),
    ErrorInput("list index assignment out of range", lambda d: Z(d, 3).__setitem__([0, 3], 1.0), IndexError,
               r"index 3 is out of bounds for dimension 0 with size 3"),
]

GM = SimpleNamespace(L=gm, F=F, nn=gm.nn)


def B(name, call, exc, pattern, devices=None):
    """A case written for both libraries: call(dev, lib)."""
    return ErrorInput(name, call, exc, pattern, both=True, devices=devices)


def z(dev, lib, *shape, dtype="float32"):
    return lib.L.zeros(shape, dtype=getattr(lib.L, dtype), device=dev)  # a tuple: torch.zeros() needs a size


def ix(dev, lib, values):
    return lib.L.tensor(values, device=dev)


HOST = ("cpu", "cuda")  # checks of tensor values: meta has none

POOL_MORE = [
    B("avg_pool2d zero stride", lambda d, l: l.F.avg_pool2d(z(d, l, 1, 1, 4, 4), 2, stride=0), ValueError,
      r"avg_pool2d: stride must be positive, got \(0, 0\)"),
    B("avg_pool2d padding over half the kernel", lambda d, l: l.F.avg_pool2d(z(d, l, 1, 1, 4, 4), 2, padding=2),
      ValueError, r"padding \(2, 2\) must be at most half of kernel_size \(2, 2\)"),
    B("max_pool2d zero dilation", lambda d, l: l.F.max_pool2d(z(d, l, 1, 1, 4, 4), 2, dilation=0), ValueError,
      r"max_pool2d: dilation must be positive, got \(0, 0\)"),
    B("max_pool2d rank-2 input", lambda d, l: l.F.max_pool2d(z(d, l, 4, 4), 2), ValueError,
      r"max_pool2d: expected input of 3 dimensions .* got shape \(4, 4\)"),
    B("adaptive_avg_pool2d negative size", lambda d, l: l.F.adaptive_avg_pool2d(z(d, l, 1, 1, 4, 4), -1),
      ValueError, r"output_size must be non-negative, got -1"),
    B("adaptive_max_pool2d empty image", lambda d, l: l.F.adaptive_max_pool2d(z(d, l, 1, 1, 0, 4), 2), ValueError,
      r"non-zero C, H and W, got shape \(1, 1, 0, 4\)"),
    B("max_pool1d rank-5 input", lambda d, l: l.F.max_pool1d(z(d, l, 1, 1, 4, 4, 4), 2), RuntimeError,
      r"max_pool1d: expected a 2-D \(C, L\) or 3-D \(N, C, L\) input"),
    B("avg_pool1d kernel longer than input", lambda d, l: l.F.avg_pool1d(z(d, l, 1, 1, 2), 3), ValueError,
      r"kernel is larger than the padded input"),
]

NORM_MORE = [
    B("batch_norm running_mean of the wrong size", lambda d, l: l.F.batch_norm(z(d, l, 2, 3, 4, 4), z(d, l, 4),
      z(d, l, 3), training=False), ValueError, r"running_mean should have shape \(3,\) .* got shape \(4,\)"),
    B("batch_norm weight of the wrong size", lambda d, l: l.F.batch_norm(z(d, l, 2, 3, 4, 4), z(d, l, 3), z(d, l, 3),
      weight=z(d, l, 2), training=False), ValueError, r"weight should have shape \(3,\)"),
    B("batch_norm one value per channel in training", lambda d, l: l.F.batch_norm(z(d, l, 1, 3, 1, 1), z(d, l, 3),
      z(d, l, 3), training=True), ValueError, r"Expected more than 1 value per channel when training"),
    B("batch_norm int64 input", lambda d, l: l.F.batch_norm(z(d, l, 2, 3, 4, 4, dtype="int64"), z(d, l, 3),
      z(d, l, 3), training=False), TypeError, r"batch_norm: input must be a floating point tensor"),
    B("group_norm groups do not divide channels", lambda d, l: l.F.group_norm(z(d, l, 2, 6, 4, 4), 4), RuntimeError,
      r"divisible by num_groups .* input of shape \(2, 6, 4, 4\) and num_groups=4"),
    B("group_norm weight of the wrong size", lambda d, l: l.F.group_norm(z(d, l, 2, 6, 4, 4), 3, weight=z(d, l, 5)),
      RuntimeError, r"weight of shape \(5,\) and input of shape \(2, 6, 4, 4\)"),
    B("layer_norm shape does not end the input", lambda d, l: l.F.layer_norm(z(d, l, 2, 3, 4), (5,)), RuntimeError,
      r"normalized_shape=\[5\], expected input with shape \[\*, 5\]"),
    B("instance_norm one spatial element", lambda d, l: l.F.instance_norm(z(d, l, 2, 3, 1, 1)), ValueError,
      r"Expected more than 1 spatial element when training"),
]

LOSSES_MORE = [
    B("cross_entropy batch sizes differ", lambda d, l: l.F.cross_entropy(z(d, l, 2, 3), z(d, l, 3, dtype="int64")),
      ValueError, r"target shape \(3,\) does not match input shape \(2, 3\)"),
    B("cross_entropy class index out of range", lambda d, l: l.F.cross_entropy(z(d, l, 2, 3), ix(d, l, [0, 3])),
      IndexError, r"target 3 is out of bounds for 3 classes", devices=HOST),
    B("cross_entropy negative class index", lambda d, l: l.F.cross_entropy(z(d, l, 2, 3), ix(d, l, [0, -2])),
      IndexError, r"target -2 is out of bounds", devices=HOST),
    B("cross_entropy class weight of the wrong size", lambda d, l: l.F.cross_entropy(z(d, l, 2, 3),
      z(d, l, 2, dtype="int64"), weight=z(d, l, 4)), ValueError, r"weight should have shape \(3,\)"),
    B("cross_entropy unknown reduction", lambda d, l: l.F.cross_entropy(z(d, l, 2, 3), z(d, l, 2, dtype="int64"),
      reduction="avg"), ValueError, r"reduction must be 'none', 'mean' or 'sum', got 'avg'"),
    B("cross_entropy label_smoothing above 1", lambda d, l: l.F.cross_entropy(z(d, l, 2, 3),
      z(d, l, 2, dtype="int64"), label_smoothing=1.5), ValueError, r"label_smoothing must be in \[0, 1\], got 1.5"),
    B("nll_loss class index out of range", lambda d, l: l.F.nll_loss(z(d, l, 2, 3), ix(d, l, [0, 7])), IndexError,
      r"target 7 is out of bounds for 3 classes", devices=HOST),
    B("binary_cross_entropy shapes differ", lambda d, l: l.F.binary_cross_entropy(z(d, l, 2, 3), z(d, l, 3, 2)),
      ValueError, r"target shape \(3, 2\) does not match input shape \(2, 3\)"),
    # an integer target or input: PyTorch's errors, not a loss truncated to the target's dtype (SB3's Bernoulli)
    B("binary_cross_entropy_with_logits int64 target",
      lambda d, l: l.F.binary_cross_entropy_with_logits(z(d, l, 2, 3), z(d, l, 2, 3, dtype="int64")),
      RuntimeError, r"result type Float can't be cast to the desired output type Long"),
    B("binary_cross_entropy_with_logits int64 input",
      lambda d, l: l.F.binary_cross_entropy_with_logits(z(d, l, 2, 3, dtype="int64"), z(d, l, 2, 3)),
      NotImplementedError, r"not implemented for 'Long'"),
    B("kl_div int64 target", lambda d, l: l.F.kl_div(z(d, l, 2, 3), z(d, l, 2, 3, dtype="int64"), reduction="sum"),
      RuntimeError, r"kl_div: Integral inputs not supported"),
    # the size is checked before the dtype (an int64 target of another size): a ValueError, as PyTorch's
    B("binary_cross_entropy int64 target of another size",
      lambda d, l: l.F.binary_cross_entropy(z(d, l, 8, 1), z(d, l, 8, dtype="int64")),
      ValueError, r"target shape \(8,\) does not match input shape \(8, 1\)"),
    B("l1_loss shapes that do not broadcast", lambda d, l: l.F.l1_loss(z(d, l, 2, 3), z(d, l, 2, 2)), ValueError,
      r"l1_loss: the size of input \(2, 3\) and of target \(2, 2\) cannot be broadcast together"),
    B("smooth_l1_loss negative beta", lambda d, l: l.F.smooth_l1_loss(z(d, l, 2), z(d, l, 2), beta=-1.5),
      RuntimeError, r"does not support negative values for beta, got -1.5$"),
    B("huber_loss zero delta", lambda d, l: l.F.huber_loss(z(d, l, 2), z(d, l, 2), delta=0.0), RuntimeError,
      r"does not support non-positive values for delta, got 0$"),
]

SHAPES_MORE = [
    B("softmax dim out of range", lambda d, l: l.F.softmax(z(d, l, 2, 3), dim=2), IndexError,
      r"dimension 2 is out of range for a tensor with 2 dimensions"),
    B("sum dim out of range", lambda d, l: z(d, l, 2, 3).sum(dim=2), IndexError, r"dim 2 is out of range"),
    B("argmax dim out of range", lambda d, l: z(d, l, 2, 3).argmax(dim=5), IndexError, r"dim 5 is out of range"),
    B("mean of an int64 tensor", lambda d, l: z(d, l, 2, 3, dtype="int64").mean(), TypeError,
      r"mean: the result of a mean needs a floating point dtype, got int64"),
    B("cat sizes differ", lambda d, l: l.L.cat([z(d, l, 2, 3), z(d, l, 2, 4)], dim=0), ValueError,
      r"cat: the tensor at position 1 has shape \(2, 4\)"),
    B("cat of nothing", lambda d, l: l.L.cat([], dim=0), ValueError, r"cat: expected a non-empty sequence"),
    B("stack shapes differ", lambda d, l: l.L.stack([z(d, l, 2, 3), z(d, l, 3, 2)]), ValueError,
      r"stack: all tensors must have the same shape"),
    B("reshape with two -1", lambda d, l: z(d, l, 2, 3).reshape(-1, -1), ValueError,
      r"only one dimension can be -1"),
    B("view of a transposed tensor", lambda d, l: z(d, l, 2, 3).t().view(6), ValueError,
      r"view: cannot view a tensor of shape \(3, 2\) as \(6,\)"),
    B("permute with a repeated dim", lambda d, l: z(d, l, 2, 3).permute(0, 0), ValueError,
      r"dimension 0 appears more than once"),
    B("transpose dim out of range", lambda d, l: z(d, l, 2, 3).transpose(0, 2), IndexError,
      r"dimension 2 is out of range"),
    B("flatten start after end", lambda d, l: z(d, l, 2, 3, 4).flatten(2, 1), ValueError,
      r"start_dim 2 comes after end_dim 1"),
    B("expand to a smaller size", lambda d, l: z(d, l, 2, 3).expand(2, 2), ValueError,
      r"cannot expand shape \(2, 3\) to \(2, 2\)"),
    B("narrow past the end", lambda d, l: z(d, l, 4).narrow(0, 2, 3), RuntimeError,
      r"start \(2\) \+ length \(3\) exceeds dimension size \(4\)"),
    B("chunk into zero", lambda d, l: z(d, l, 4).chunk(0), RuntimeError, r"chunk expects `chunks` to be greater"),
    B("in-place add that would broadcast self", lambda d, l: z(d, l, 3).add_(z(d, l, 2, 3)), ValueError,
      r"out has shape \(3,\) but the result has shape \(2, 3\)"),
    B("in-place multiply of int64 by a float", lambda d, l: z(d, l, 3, dtype="int64").mul_(1.5), TypeError,
      r"result type float32 can't be cast to the desired output type int64"),
    B("matmul of a 0-d tensor", lambda d, l: z(d, l) @ z(d, l, 3), ValueError,
      r"both arguments need at least 1 dimension"),
    B("bmm batch sizes differ", lambda d, l: l.L.bmm(z(d, l, 2, 3, 4), z(d, l, 3, 4, 5)), RuntimeError,
      r"batch1 and batch2 must have the same batch size, got 2 and 3"),
    B("item of two elements", lambda d, l: z(d, l, 2).item(), ValueError,
      r"only a tensor with one element can be converted"),
    B("index with too many indices", lambda d, l: z(d, l, 2, 3)[0, 0, 0], IndexError, r"too many indices"),
    B("bool mask of the wrong shape", lambda d, l: z(d, l, 2, 3)[l.L.zeros(3, dtype=l.L.bool, device=d)],
      IndexError, r"the mask of shape \(3,\) does not match"),
    B("float tensor as an index", lambda d, l: z(d, l, 4)[z(d, l, 2)], IndexError,
      r"tensors used as indices must be long, int, byte or bool tensors"),
]

NN_MORE = [
    B("linear bias of the wrong size", lambda d, l: l.F.linear(z(d, l, 2, 3), z(d, l, 4, 3), z(d, l, 5)), ValueError,
      r"bias must be 1-D with out_features=4 elements, got shape \(5,\)"),
    B("linear on a 0-d input", lambda d, l: l.F.linear(z(d, l), z(d, l, 4, 3)), ValueError,
      r"expected an input with at least 1 dimension"),
    B("conv2d bias of the wrong size", lambda d, l: l.F.conv2d(z(d, l, 1, 1, 4, 4), z(d, l, 2, 1, 3, 3),
      z(d, l, 3)), ValueError, r"bias must be 1-D with out_channels=2 elements, got shape \(3,\)"),
    B("conv2d padding='same' with stride", lambda d, l: l.F.conv2d(z(d, l, 1, 1, 4, 4), z(d, l, 1, 1, 3, 3),
      stride=2, padding="same"), ValueError, r"padding='same' is not supported for strided convolutions"),
    B("conv2d unknown padding string", lambda d, l: l.F.conv2d(z(d, l, 1, 1, 4, 4), z(d, l, 1, 1, 3, 3),
      padding="full"), ValueError, r"invalid padding string 'full'"),
    B("conv2d zero groups", lambda d, l: l.F.conv2d(z(d, l, 1, 2, 4, 4), z(d, l, 2, 2, 3, 3), groups=0), ValueError,
      r"groups must be positive, got 0"),
    B("conv_transpose2d output_padding not below stride", lambda d, l: l.F.conv_transpose2d(z(d, l, 1, 1, 4, 4),
      z(d, l, 1, 1, 3, 3), stride=2, output_padding=2), ValueError,
      r"output_padding must be non-negative and smaller than either stride or dilation"),
    B("pad of odd length", lambda d, l: l.F.pad(z(d, l, 1, 1, 4, 4), (1, 2, 3)), RuntimeError,
      r"Padding length must be divisible by 2"),
    B("pad unknown mode", lambda d, l: l.F.pad(z(d, l, 1, 1, 4, 4), (1, 1), mode="wrap"), NotImplementedError,
      r"Unrecognised padding mode wrap"),
    B("interpolate without size or scale", lambda d, l: l.F.interpolate(z(d, l, 1, 1, 4, 4)), ValueError,
      r"either size or scale_factor should be defined"),
    B("interpolate with size and scale", lambda d, l: l.F.interpolate(z(d, l, 1, 1, 4, 4), size=8, scale_factor=2),
      ValueError, r"only one of size or scale_factor should be defined"),
    B("interpolate to size 0", lambda d, l: l.F.interpolate(z(d, l, 1, 1, 4, 4), size=0), ValueError,
      r"the output size \(0, 0\) must be positive"),
    B("embedding index out of range", lambda d, l: l.F.embedding(ix(d, l, [0, 5]), z(d, l, 5, 3)), IndexError,
      r"index 5 is out of bounds for dimension 0 with size 5", devices=HOST),
    B("embedding with float indices", lambda d, l: l.F.embedding(z(d, l, 2), z(d, l, 5, 3)), RuntimeError,
      r"'indices' to have scalar type Long"),
    B("one_hot of a negative class", lambda d, l: l.F.one_hot(ix(d, l, [0, -1])), RuntimeError,
      r"Class values must be non-negative", devices=HOST),
    B("one_hot with too few classes", lambda d, l: l.F.one_hot(ix(d, l, [0, 3]), num_classes=3), RuntimeError,
      r"Class values must be smaller than num_classes", devices=HOST),
    B("dropout probability above 1", lambda d, l: l.F.dropout(z(d, l, 3), p=1.5), ValueError,
      r"dropout probability has to be between 0 and 1, but got 1.5"),
    B("pixel_shuffle channels not divisible", lambda d, l: l.F.pixel_shuffle(z(d, l, 1, 3, 2, 2), 2), RuntimeError,
      r"divisible by the square of upscale_factor"),
    B("leaky_relu of int64", lambda d, l: l.F.leaky_relu(z(d, l, 3, dtype="int64")), TypeError,
      r"leaky_relu: input must be a floating point tensor"),
    B("prelu weight of the wrong size", lambda d, l: l.F.prelu(z(d, l, 1, 3, 2, 2), z(d, l, 2)), ValueError,
      r"found parameter numbers = 2 and channel size = 3"),
    B("hardtanh min above max", lambda d, l: l.F.hardtanh(z(d, l, 3), min_val=2.0, max_val=1.0), ValueError,
      r"min_val cannot be greater than max_val"),
]

MODULES = [
    B("Conv2d out_channels not divisible by groups", lambda d, l: l.nn.Conv2d(4, 6, 3, groups=4, device=d),
      ValueError, r"out_channels \(6\) must be divisible by groups \(4\)"),
    B("Conv2d negative kernel", lambda d, l: l.nn.Conv2d(1, 3, -1, device=d), ValueError,
      r"kernel_size must be positive"),
    B("Linear negative in_features", lambda d, l: l.nn.Linear(-1, 3, device=d), ValueError,
      r"in_features must be a non-negative int, got -1"),
    B("BatchNorm2d on a 2-D input", lambda d, l: l.nn.BatchNorm2d(3, device=d)(z(d, l, 2, 3)), ValueError,
      r"expected 4D input \(got 2D input"),
    B("BatchNorm2d channels differ", lambda d, l: l.nn.BatchNorm2d(3, device=d)(z(d, l, 2, 4, 2, 2)), ValueError,
      r"running_mean should have shape \(4,\)"),
    B("Dropout probability above 1", lambda d, l: l.nn.Dropout(1.5), ValueError,
      r"dropout probability has to be between 0 and 1"),
    B("Sequential of a non-module", lambda d, l: l.nn.Sequential(3), TypeError, r"int is not a Module subclass"),
    B("add_module with a dotted name", lambda d, l: l.nn.Module().add_module("a.b", l.nn.ReLU()), KeyError,
      r'module name must not contain "\."'),
    B("load_state_dict missing a key", lambda d, l: l.nn.Linear(2, 3, device=d).load_state_dict(
      {"weight": z(d, l, 3, 2)}), RuntimeError, r'Missing key\(s\) in state_dict: "bias"'),
    B("load_state_dict shape mismatch", lambda d, l: l.nn.Linear(2, 3, device=d).load_state_dict(
      {"weight": z(d, l, 2, 3), "bias": z(d, l, 3)}), RuntimeError, r"size mismatch for weight"),
]

OPTIM = [
    B("SGD negative lr", lambda d, l: l.L.optim.SGD([l.nn.Parameter(z(d, l, 2))], lr=-0.1), ValueError,
      r"lr -0.1"),
    B("SGD nesterov without momentum", lambda d, l: l.L.optim.SGD([l.nn.Parameter(z(d, l, 2))], lr=0.1,
      nesterov=True), ValueError, r"[Nn]esterov momentum requires a momentum"),
    B("Adam beta1 of 1", lambda d, l: l.L.optim.Adam([l.nn.Parameter(z(d, l, 2))], betas=(1.0, 0.999)), ValueError,
      r"betas\[0\]"),
    B("Adam negative eps", lambda d, l: l.L.optim.Adam([l.nn.Parameter(z(d, l, 2))], eps=-1e-8), ValueError,
      r"eps"),
    B("Adam with no parameters", lambda d, l: l.L.optim.Adam([]), ValueError, r"empty parameter list"),
    B("a parameter in two groups", lambda d, l: (lambda p: l.L.optim.Adam([{"params": [p]}, {"params": [p]}]))(
      l.nn.Parameter(z(d, l, 2))), ValueError, r"more than one parameter group"),
    B("StepLR of a non-optimizer", lambda d, l: l.L.optim.lr_scheduler.StepLR(3, 1), TypeError,
      r"is not an Optimizer"),
]

AUTOGRAD = [
    B("backward of a non-scalar without gradient", lambda d, l: (l.nn.Parameter(z(d, l, 2)) * 2).backward(),
      RuntimeError, r"grad can be implicitly created only for a? ?(single-element|scalar) output"),
    B("backward of a tensor that needs no grad", lambda d, l: z(d, l, 2).sum().backward(), RuntimeError,
      r"does not require grad and (has no|does not have a) grad_fn"),
    B("backward twice through freed saved tensors", lambda d, l: (lambda y: (y.backward(), y.backward()))(
      (l.nn.Parameter(z(d, l, 2)) ** 2).sum()), RuntimeError, r"backward through .* a second time"),
    B("requires_grad on an int64 tensor", lambda d, l: z(d, l, 2, dtype="int64").requires_grad_(), RuntimeError,
      r"only .*floating point.* can require gradients"),
]

CREATION = [
    B("full with a negative size", lambda d, l: l.L.full((2, -1), 1.0, device=d), ValueError,
      r"sizes must be non-negative, got -1 in dimension 1"),
    B("arange with step 0", lambda d, l: l.L.arange(0, 5, 0, device=d), ValueError,
      r"arange: step must be non-zero and bounds finite \(start=0, end=5, step=0\)"),
    B("arange stepping away from the end", lambda d, l: l.L.arange(0, 5, -1, device=d), ValueError,
      r"arange: the bounds start=0, end=5 are inconsistent with step=-1"),
    B("randint with low above high", lambda d, l: l.L.randint(5, 2, (3,), device=d), RuntimeError,
      r"expects 'from' to be less than 'to', but got from=5 >= to=2"),
    B("tensor from a ragged list", lambda d, l: l.L.tensor([[1, 2], [3]], device=d), ValueError,
      r"(rectangular|inhomogeneous|expected sequence of length)"),
    B("to an unknown device", lambda d, l: z(d, l, 2).to("tpu"), ValueError, r"unknown device 'tpu'"),
]

CASES = (CONV + LINEAR + MATMUL + SHAPES + LOSSES + POOL + NORM + DTYPES + INDEX + POOL_MORE + NORM_MORE
         + LOSSES_MORE + SHAPES_MORE + NN_MORE + MODULES + OPTIM + AUTOGRAD + CREATION)

from error_inputs_api import API_CASES  # noqa: E402 - the families; it imports the helpers above

CASES += API_CASES

from error_inputs_extra import CASES as EXTRA_CASES  # noqa: E402 - the topic files; they import the helpers above

CASES += EXTRA_CASES
