"""gpumemnet.nn.init: in-place initialisations with PyTorch's names and formulas, drawing from the global Philox
generator (gm.manual_seed), or from generator=g (that gm.Generator's own stream, as Tensor.uniform_(generator=g)).
Each one runs under no_grad and returns its tensor. On the meta device they draw nothing but still advance the
generator exactly as the CPU would, so a model built on meta and one built on cpu leave the generator in the same
state.

The structured ones (orthogonal_'s QR, trunc_normal_'s inverse normal CDF, eye_, dirac_, sparse_'s zero pattern)
draw on the tensor's device through the same generator, then compute the values on the host in NumPy and copy
them back once: initialisation runs once per model, and this keeps every random draw the generator's."""
import math
import warnings

import numpy as np

from .. import _C
from .._core.autograd import no_grad
from .._core.random import drawing_from

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "zeros_", "ones_", "eye_",
           "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
           "sparse_"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity, param=None):
    """The gain that keeps activations' variance stable through a layer followed by `nonlinearity`."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (PyTorch's convention, also for
    ConvTranspose2d whose weight is (in, out/groups, kH, kW))."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of {['fan_in', 'fan_out']}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _check(tensor, name):
    if not isinstance(tensor, _C.TensorBase):
        raise TypeError(f"{name}: expected a gpumemnet Tensor, got {type(tensor).__name__}")


def _fill_random(name, fill, tensor, a, b, generator):
    _check(tensor, name)
    with no_grad(), drawing_from(generator):
        fill(tensor, float(a), float(b))
    return tensor


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    return _fill_random("uniform_", _C.uniform_, tensor, a, b, generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    return _fill_random("normal_", _C.normal_, tensor, mean, std, generator)


def constant_(tensor, val):
    _check(tensor, "constant_")
    with no_grad():
        _C.fill_(tensor, val)
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity, name):
    if 0 in tuple(tensor.shape):
        warnings.warn(f"{name}: initializing zero-element tensors is a no-op")
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015). Conv2d and Linear use a=sqrt(5),
    which gives bound = 1/sqrt(fan_in)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_")
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


# ---- structured initialisations (values computed on the host) ------------------------------------------------
def _host(tensor):
    """The tensor's values as a float64 ndarray (a host copy)."""
    t = tensor.detach()
    if t._device != "cpu":
        t = t.cpu()
    return np.asarray(t.float().numpy() if t._dtype == 3 else t.numpy(), dtype=np.float64)


def _write(tensor, array):
    """Copy a host array of the tensor's shape into it (one transfer, converted to its dtype)."""
    src = _C.from_numpy(np.asarray(array.reshape(tuple(tensor.shape)), order="C"), tensor._dtype, tensor._device)
    _C.copy_(tensor, src)


# Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9, well below float32's
# rounding): NumPy has no erfinv, and one uniform draw + the inverse CDF keeps the generator's advance fixed.
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
      -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
      -1.328068155288572e+01)
_CC = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
       4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)


def _ndtri(p):
    p = np.asarray(p, dtype=np.float64)
    out = np.empty_like(p)
    lo, hi = p < 0.02425, p > 1 - 0.02425
    mid = ~(lo | hi)
    q = p[mid] - 0.5
    r = q * q
    out[mid] = (((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]) * q / \
        (((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        for mask, sign, val in ((lo, 1.0, p), (hi, -1.0, 1 - p)):
            q = np.sqrt(-2 * np.log(val[mask]))
            out[mask] = sign * (((((_CC[0] * q + _CC[1]) * q + _CC[2]) * q + _CC[3]) * q + _CC[4]) * q + _CC[5]) / \
                ((((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1)
    out[p <= 0] = -np.inf  # the limits, which the tail formula would make nan
    out[p >= 1] = np.inf
    return out


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std^2) truncated to [a, b] (a and b are absolute bounds, as in PyTorch): a uniform draw between the
    normal CDF at a and at b, mapped through the inverse CDF, clamped to [a, b] against rounding."""
    _check(tensor, "trunc_normal_")
    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)

    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    with no_grad():
        # Half types draw their uniforms in float32: float16's steps near 1 (2^-11) would cut the tails off.
        draw = tensor if tensor._dtype in (0, 1) else _C.empty(tuple(tensor.shape), 0, tensor._device)
        with drawing_from(generator):
            _C.uniform_(draw, cdf((a - mean) / std), cdf((b - mean) / std))
        if tensor._device != "meta" and tensor.numel() > 0:
            _write(tensor, np.clip(mean + std * _ndtri(_host(draw)), a, b))
    return tensor


def eye_(tensor):
    """The identity matrix (2-D tensors only; rectangular: ones on the main diagonal)."""
    _check(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        if tensor._device != "meta":
            _write(tensor, np.eye(*tuple(tensor.shape)))
    return tensor


def dirac_(tensor, groups=1):
    """The Dirac delta for a {3, 4, 5}-D convolution weight: each group passes through as many input channels as
    it can, unchanged (1 at the kernel's centre)."""
    _check(tensor, "dirac_")
    dims = tensor.ndim
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    if tensor._device == "meta":
        return tensor
    per_group = sizes[0] // groups
    out = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min(per_group, sizes[1])):
            out[(g * per_group + d, d) + centre] = 1
    with no_grad():
        _write(tensor, out)
    return tensor


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix, trailing dimensions flattened (Saxe et al., 2013): the Q of a QR factorisation
    of a standard normal draw, its columns' signs fixed by R's diagonal so that Q is uniformly distributed. The
    normal draw is the generator's, on the tensor's device; the QR runs in NumPy on the host (float64) under
    no_grad, and Q is copied back once."""
    _check(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    with no_grad():
        with drawing_from(generator):
            _C.normal_(tensor, 0.0, 1.0)
        if tensor._device == "meta":
            return tensor
        rows = tensor.shape[0]
        flat = _host(tensor).reshape(rows, -1)
        if rows < flat.shape[1]:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        q = q * np.sign(np.diag(r))
        if rows < q.shape[0]:
            q = q.T
        _write(tensor, q * gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor drawn from N(0, std^2) (from generator= when given) with ceil(sparsity * rows) zeros in each
    column, at random rows (a uniform draw of the global generator, ranked per column, as PyTorch's)."""
    _check(tensor, "sparse_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if tensor._device == "meta":
        return tensor
    rows, cols = tuple(tensor.shape)
    num_zeros = math.ceil(sparsity * rows)
    with no_grad():
        with drawing_from(generator):
            _C.normal_(tensor, 0.0, float(std))
        # float64 keys, on the host: their ranks are the permutation. From the global generator even with
        # generator=, as PyTorch's sparse_ draws its zero rows (torch.randperm without generator).
        keys = _C.empty((rows, cols), 1, "cpu")
        _C.uniform_(keys, 0.0, 1.0)
        values = _host(tensor)
        zero_rows = np.argsort(_C.TensorBase.numpy(keys), axis=0)[:num_zeros]
        values[zero_rows, np.arange(cols)[None, :]] = 0
        _write(tensor, values)
    return tensor


def _make_deprecate(meth):
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.", FutureWarning,
                      stacklevel=2)
        return meth(*args, **kwargs)
    deprecated_init.__name__ = old_name
    deprecated_init.__doc__ = f"Deprecated alias of {new_name} (as in PyTorch)."
    return deprecated_init


# PyTorch's deprecated names without the trailing underscore, which older repositories still call.
uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)


# PyTorch's private helpers of the same fills, which libraries import (mup's init, timm's older trunc_normal_)
def _no_grad_uniform_(tensor, a, b, generator=None):
    return uniform_(tensor, a, b, generator)


def _no_grad_normal_(tensor, mean, std, generator=None):
    return normal_(tensor, mean, std, generator)


def _no_grad_trunc_normal_(tensor, mean, std, a, b, generator=None):
    return trunc_normal_(tensor, mean, std, a, b, generator)


def _no_grad_fill_(tensor, val):
    return constant_(tensor, val)


def _no_grad_zero_(tensor):
    return zeros_(tensor)
