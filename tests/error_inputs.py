"""One table of bad inputs for the public ops (PyTorch's OpInfo `error_inputs`): each case builds its tensors on
the device it is given, calls the op, and names the exception type and a pattern of its message. test_error_inputs.py
runs every case on the CPU, on meta and (when available, the emulator included) on CUDA, and checks that each
device raises the same thing: a program checked on meta fails there exactly as it would on the CPU or the GPU.

A case is ErrorInput(name, call, exc, pattern) where call(dev) performs the bad call. Add a case beside its op's
group when an op gains an argument check."""
from dataclasses import dataclass
from typing import Callable

import gpumemnet as gm
import gpumemnet.nn.functional as F


@dataclass(frozen=True)
class ErrorInput:
    name: str
    call: Callable
    exc: type
    pattern: str


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
    ErrorInput("mse_loss shapes differ", lambda d: F.mse_loss(Z(d, 2, 3), Z(d, 3, 2)), ValueError,
               r"target shape \(3, 2\) does not match input shape \(2, 3\)"),
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

CASES = CONV + LINEAR + MATMUL + SHAPES + LOSSES + POOL + NORM + DTYPES + INDEX
