"""torch.* names that are other layers' functions under a second name (torch.conv2d is F.conv2d, torch.exp_ is
Tensor.exp_ ...), torch's module-level constants, queries and settings (torch.inf, torch.is_autocast_enabled,
torch.set_deterministic_debug_mode ...), torch.range and torch.asarray: the package's face (layer 4) imports
__all__. It also gives Tensor the methods PyTorch has for functions of higher modules (histc, multinomial,
hardshrink).

Where torch.<name> has a signature of its own (torch.dropout(input, p, train), torch.batch_norm(input, weight,
bias, running_mean, running_var, training, momentum, eps, cudnn_enabled), torch.embedding(weight, indices, ...),
the losses' integer reduction), the alias takes that signature and calls the functional form. The cudnn flags are
accepted and have no effect (gpumemnet picks its own kernels)."""
import builtins
import math
import numbers
import warnings

from . import _C
from . import backends as _backends
from . import linalg as _linalg
from ._core import autocast as _autocast
from ._core.autocast import check_device_type as _device_type
from ._core.autograd import refuse_inplace as _refuse_inplace
from ._core.creation import arange as _arange, as_tensor as _as_tensor
from ._core.creation_more import histc as _histc, multinomial as _multinomial
from ._core.dtype import SCALAR_TYPE_NAMES as _SCALAR_TYPE_NAMES, dtype as _dtype, get_default_dtype as _default_dtype
from ._core.storage import UntypedStorage as _UntypedStorage
from ._core.random import drawing_from as _drawing_from
from ._core.tensor import Tensor as _Tensor
from ._core.tensor_methods import _where
from .nn import functional as F
from ._segments import segment_reduce

_segment_reduce = segment_reduce

__all__ = ["inf", "nan", "e", "pi", "newaxis", "is_autocast_enabled", "get_autocast_dtype", "get_autocast_gpu_dtype",
           "get_autocast_cpu_dtype", "is_autocast_cpu_enabled", "set_autocast_enabled", "set_autocast_cpu_enabled",
           "set_autocast_dtype", "set_autocast_gpu_dtype", "set_autocast_cpu_dtype", "is_autocast_cache_enabled",
           "set_autocast_cache_enabled", "clear_autocast_cache", "autocast_increment_nesting",
           "autocast_decrement_nesting", "range", "asarray",
           "get_deterministic_debug_mode", "set_deterministic_debug_mode", "get_num_interop_threads",
           "set_num_interop_threads", "set_warn_always", "is_warn_always_enabled", "is_storage", "_assert",
           "_assert_async",
           # F's functions under their torch.* names, with F's signature
           "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "adaptive_avg_pool1d", "cosine_similarity",
           "pairwise_distance", "hardshrink", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "bilinear",
           "pdist", "rms_norm", "convolution", "conv3d", "conv_transpose3d",
           # torch.*'s own signatures
           "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "avg_pool1d", "adaptive_max_pool1d",
           "batch_norm", "instance_norm", "layer_norm", "group_norm", "dropout", "dropout_", "alpha_dropout",
           "alpha_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_", "embedding", "kl_div",
           "binary_cross_entropy_with_logits", "celu", "celu_", "selu", "selu_", "threshold", "threshold_",
           "rrelu", "rrelu_", "feature_dropout", "feature_dropout_", "norm_except_dim", "constant_pad_nd",
           "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss", "triplet_margin_loss",
           "poisson_nll_loss",
           # a module of its own (layer 2), exported from here; torch._segment_reduce is the same function (PyG's
           # softmax(ptr=) and its aggregations call that name)
           "segment_reduce", "_segment_reduce"]

inf = math.inf
nan = math.nan
e = math.e
pi = math.pi
newaxis = None

# ---- autocast and device queries ---------------------------------------------------------------------------------
def is_autocast_enabled(device_type=None):
    """Whether autocast is on for device_type; without one, for CUDA (PyTorch's legacy meaning)."""
    return _autocast.is_autocast_enabled(_device_type("cuda" if device_type is None else device_type,
                                                      "is_autocast_enabled"))


def is_autocast_cpu_enabled():
    return _autocast.is_autocast_enabled("cpu")


def get_autocast_dtype(device_type):
    """The dtype autocast lowers to on device_type (the active region's, else that device's default)."""
    return _autocast.get_autocast_dtype(_device_type(device_type, "get_autocast_dtype"))


def get_autocast_gpu_dtype():
    return _autocast.get_autocast_dtype("cuda")


def get_autocast_cpu_dtype():
    return _autocast.get_autocast_dtype("cpu")


def set_autocast_enabled(*args):
    """torch.set_autocast_enabled(device_type, enabled), or the legacy (enabled) for CUDA: the state a `with
    autocast(...)` sets, switched by hand (its exit puts back what it found)."""
    if len(args) == 1:
        args = ("cuda",) + args
    if len(args) != 2:
        raise TypeError(f"set_autocast_enabled() takes (device_type, enabled) or (enabled), got {len(args)} arguments")
    device_type = _device_type(args[0], "set_autocast_enabled")
    if not isinstance(args[1], bool):
        raise TypeError(f"set_autocast_enabled(): argument 'enabled' must be bool, not {type(args[1]).__name__}")
    _autocast.set_enabled(device_type, args[1])


def _flag(enabled):
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool (got {type(enabled).__name__})")
    return enabled


def _a_dtype(dtype, op):
    if not isinstance(dtype, _dtype):
        raise TypeError(f"{op}(): argument 'dtype' must be torch.dtype, not {type(dtype).__name__}")
    return dtype


def set_autocast_cpu_enabled(enabled):
    _autocast.set_enabled("cpu", _flag(enabled))


def set_autocast_dtype(device_type, dtype):
    """The dtype autocast regions on device_type lower to (a region that names no dtype takes it)."""
    _autocast.set_dtype(_device_type(device_type, "set_autocast_dtype"), _a_dtype(dtype, "set_autocast_dtype"))


def set_autocast_gpu_dtype(dtype):
    _autocast.set_dtype("cuda", _a_dtype(dtype, "set_autocast_gpu_dtype"))


def set_autocast_cpu_dtype(dtype):
    _autocast.set_dtype("cpu", _a_dtype(dtype, "set_autocast_cpu_dtype"))


def is_autocast_cache_enabled():
    """Whether autocast regions keep one low-precision copy of each parameter for the outermost region."""
    return _autocast.cache_enabled()


def set_autocast_cache_enabled(enabled):
    _autocast.set_cache_enabled(_flag(enabled))


def clear_autocast_cache():
    _autocast.clear_cache()


def autocast_increment_nesting():
    return _autocast.increment_nesting()


def autocast_decrement_nesting():
    return _autocast.decrement_nesting()


def range(start=0, end=None, step=1, *, dtype=None, layout=None, device=None, requires_grad=False):  # noqa: A001
    """Deprecated in PyTorch (use arange): start..end with end included, in the default float dtype."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("range: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"range: upper bound and lower bound inconsistent with step sign (start={start}, "
                           f"end={end}, step={step})")
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    n = int(math.floor((end - start) / step)) + 1
    out = _arange(n, dtype="float64", device=device) * float(step) + float(start)
    return out.to(dtype if dtype is not None else _default_dtype()).requires_grad_(requires_grad)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """obj as a tensor: a tensor itself when dtype and device already fit (a copy with copy=True), else converted;
    other data through tensor()."""
    if isinstance(obj, _UntypedStorage):  # its bytes, shared, read as dtype (uint8 by default)
        out = obj._data
        out = out if dtype is None else out.view(dtype)
        return out.to(device) if device is not None else out
    if isinstance(obj, _C.TensorBase):
        want_dtype = obj.dtype if dtype is None else dtype
        want_device = obj.device if device is None else device
        same = str(want_dtype) == str(obj.dtype) and str(want_device).split(":")[0] == obj.device.type
        if copy is False and not same:
            raise ValueError(f"asarray: can't alias tensor with dtype {obj.dtype} on {obj.device} into dtype "
                             f"{want_dtype} on {want_device} (copy=False)")
        out = obj.to(dtype=want_dtype, device=want_device)
        out = out.clone() if copy and out is obj else out
    else:
        out = _as_tensor(obj, dtype=dtype, device=device)
    return out.requires_grad_() if requires_grad else out


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def get_deterministic_debug_mode():
    """0 (off), 1 (warn) or 2 (error): use_deterministic_algorithms' setting as a number."""
    if not _backends.are_deterministic_algorithms_enabled():
        return 0
    return 1 if _backends.is_deterministic_algorithms_warn_only_enabled() else 2


def set_deterministic_debug_mode(debug_mode):
    """use_deterministic_algorithms by number or name: 0 / "default", 1 / "warn", 2 / "error"."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif isinstance(debug_mode, bool) or not isinstance(debug_mode, numbers.Integral):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    _backends.use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


_interop = [1]  # gpumemnet runs no inter-op thread pool: the number is kept for scripts that read it back


def get_num_interop_threads():
    return _interop[0]


def set_num_interop_threads(num):
    if isinstance(num, bool) or not isinstance(num, numbers.Integral):
        raise TypeError(f"set_num_interop_threads(): argument 'num' must be int, not {type(num).__name__}")
    if num <= 0:
        raise RuntimeError(f"set_num_interop_threads expects a positive integer, got {num}")
    _interop[0] = int(num)


_warn_always = [False]


def set_warn_always(b):
    """PyTorch's flag for warnings it gives once per process; gpumemnet keeps it for is_warn_always_enabled."""
    if not isinstance(b, bool):
        raise RuntimeError(f"setWarnOnlyOnce expects a bool, but got {type(b).__name__}")
    _warn_always[0] = b


def is_warn_always_enabled():
    return _warn_always[0]


def is_storage(obj):
    """False: gpumemnet has no storage objects (torch.is_storage is True only for those)."""
    return False


def _assert(condition, message):
    """torch._assert: Python's assert, as a function (model code calls it: torchvision's ViT checks its input's
    size with it). A tensor condition is read as a bool."""
    assert condition, message


def _assert_async(condition, message=None):
    """torch._assert_async: a one-element tensor that must be nonzero (kornia checks its arguments with it); on a
    GPU PyTorch reports it later, here at once. RuntimeError, as PyTorch's."""
    if not builtins.bool(condition):
        raise RuntimeError(message or "Expected Tensor with single nonzero value, but got zero")


# ---- F's functions, same signature ----------------------------------------------------------------------------------
conv1d, conv2d, conv_transpose1d, conv_transpose2d = F.conv1d, F.conv2d, F.conv_transpose1d, F.conv_transpose2d
adaptive_avg_pool1d, cosine_similarity, pairwise_distance = F.adaptive_avg_pool1d, F.cosine_similarity, \
    F.pairwise_distance
hardshrink, pixel_shuffle, pixel_unshuffle, channel_shuffle = F.hardshrink, F.pixel_shuffle, F.pixel_unshuffle, \
    F.channel_shuffle
bilinear, pdist, rms_norm = F.bilinear, F.pdist, F.rms_norm
conv3d, conv_transpose3d = F.conv3d, F.conv_transpose3d


# ---- torch.*'s own signatures -------------------------------------------------------------------------------------
def _stride(stride):
    return None if stride in ((), []) else stride  # torch.* says () for "the kernel size"


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The convolution every conv layer calls: conv1d / conv2d / conv3d, or their transposes, by input's rank
    (N, C, L), (N, C, H, W) or (N, C, D, H, W)."""
    _tensor(input, "convolution")
    if input.ndim not in (3, 4, 5):
        raise RuntimeError(f"convolution: expected a 3-D, 4-D or 5-D (N, C, *spatial) input, got shape "
                           f"{tuple(input.shape)}")
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[input.ndim - 3]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    fn = (F.conv1d, F.conv2d, F.conv3d)[input.ndim - 3]
    return fn(input, weight, bias, stride, padding, dilation, groups)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return tuple(F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode, True))


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    return F.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)


def adaptive_max_pool1d(input, output_size):
    """(output, indices), as torch.adaptive_max_pool1d returns."""
    return tuple(F.adaptive_max_pool1d(input, output_size, True))


def _tensor(input, op):
    if not isinstance(input, _C.TensorBase):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input


def _in_place(input, op):
    """F's inplace=True forms do not refuse a leaf that requires grad; torch.<op>_ does."""
    _refuse_inplace(_tensor(input, op), op)
    return input


def _probability(p, op):
    if not 0 <= p <= 1:  # torch.*'s word (F's forms say ValueError)
        raise RuntimeError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    return p


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("instance_norm: Expected running_mean and running_var to be defined when use_input_stats "
                           "is false")
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return F.group_norm(input, num_groups, weight, bias, eps)


def dropout(input, p, train):
    return F.dropout(_tensor(input, "dropout"), _probability(p, "dropout"), train)


def dropout_(input, p, train):
    return F.dropout(_in_place(input, "dropout_"), _probability(p, "dropout_"), train, inplace=True)


def alpha_dropout(input, p, train):
    return F.alpha_dropout(_tensor(input, "alpha_dropout"), _probability(p, "alpha_dropout"), train)


def alpha_dropout_(input, p, train):
    return F.alpha_dropout(_in_place(input, "alpha_dropout_"), _probability(p, "alpha_dropout_"), train, inplace=True)


def feature_alpha_dropout(input, p, train):
    return F.feature_alpha_dropout(_tensor(input, "feature_alpha_dropout"), _probability(p, "feature_alpha_dropout"),
                                   train)


def feature_alpha_dropout_(input, p, train):
    return F.feature_alpha_dropout(_in_place(input, "feature_alpha_dropout_"),
                                   _probability(p, "feature_alpha_dropout_"), train, inplace=True)


def _feature_dropout(input, p, train, op, inplace):
    """Whole channels (dim 1 of (N, C, *)) zeroed with probability p, the others scaled by 1 / (1 - p)."""
    _probability(p, op)
    if input.ndim < 2:
        raise RuntimeError(f"{op}: Feature dropout requires at least 2 dimensions in the input, got shape "
                           f"{tuple(input.shape)}")
    if not train or p == 0:
        return input
    keep = _C.empty(tuple(input.shape[:2]) + (1,) * (input.ndim - 2), input._dtype, input._device)
    keep.bernoulli_(1.0 - p)
    scale = keep * (0.0 if p == 1 else 1.0 / (1.0 - p))
    return input.mul_(scale) if inplace else input * scale


def feature_dropout(input, p, train):
    return _feature_dropout(_tensor(input, "feature_dropout"), p, train, "feature_dropout", False)


def feature_dropout_(input, p, train):
    return _feature_dropout(_in_place(input, "feature_dropout_"), p, train, "feature_dropout_", True)


def norm_except_dim(v, pow=2, dim=0):
    """The pow-norm of v over every dim but dim, kept as size-1 dims (weight_norm's g); dim=-1: of all of v."""
    _tensor(v, "norm_except_dim")
    if dim == -1:
        return v.norm(pow)
    d = dim if 0 <= dim < v.ndim else None
    if d is None:
        raise IndexError(f"norm_except_dim: Dimension out of range (expected to be in range of [-1, {v.ndim - 1}], "
                         f"but got {dim})")
    others = [i for i in builtins.range(v.ndim) if i != d]  # this module's range is torch.range
    return v.norm(pow, dim=others, keepdim=True) if others else v.abs() if pow != 0 else (v != 0).to(v.dtype)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of weight picked by indices (note the order: weight first); a negative padding_idx is none."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


# torch.*'s losses take ATen's Reduction enum; left out it is 0 ("none") in PyTorch 2.15's bindings (its stubs say
# 1: the calls return unreduced losses), so 0 here too
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(reduction, op):
    if isinstance(reduction, bool) or not isinstance(reduction, numbers.Integral):
        raise TypeError(f"{op}(): argument 'reduction' must be int (0 none, 1 mean, 2 sum), not "
                        f"{type(reduction).__name__}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction}")
    return _REDUCTIONS[int(reduction)]


def kl_div(input, target, reduction=0, *, log_target=False):
    return F.kl_div(input, target, reduction=_reduction(reduction, "kl_div"), log_target=log_target)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    return F.binary_cross_entropy_with_logits(input, target, weight, pos_weight=pos_weight,
                                              reduction=_reduction(reduction, "binary_cross_entropy_with_logits"))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction(reduction, "cosine_embedding_loss"))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction, "margin_ranking_loss"))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, reduction=0):
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction(reduction, "triplet_margin_loss"))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction(reduction, "poisson_nll_loss"))


def celu(input, alpha=1.0):
    return F.celu(_tensor(input, "celu"), alpha)


def celu_(input, alpha=1.0):
    return F.celu(_in_place(input, "celu_"), alpha, inplace=True)


def selu(input):
    return F.selu(_tensor(input, "selu"))


def selu_(input):
    return F.selu(_in_place(input, "selu_"), inplace=True)


def threshold(input, threshold, value):
    for name, v in (("threshold", threshold), ("value", value)):
        if isinstance(v, bool) or not isinstance(v, numbers.Number):
            raise TypeError(f"threshold(): argument '{name}' must be Number, not {type(v).__name__}")
    return F.threshold(_tensor(input, "threshold"), threshold, value)


def threshold_(input, threshold, value):
    return F.threshold(_in_place(input, "threshold_"), threshold, value, inplace=True)


def rrelu(input, lower=0.125, upper=1.0 / 3, training=False, generator=None):
    with _drawing_from(generator):
        return F.rrelu(input, lower, upper, training)


def rrelu_(input, lower=0.125, upper=1.0 / 3, training=False, generator=None):
    _in_place(input, "rrelu_")
    with _drawing_from(generator):
        return F.rrelu(input, lower, upper, training, inplace=True)


def constant_pad_nd(input, pad, value=0):
    """input padded by pad (pairs from the last dim, negative ones crop) with value."""
    return F.pad(input, list(pad), "constant", value)


# ---- torch.exp_(t) ...: the in-place Tensor methods as functions ----------------------------------------------------
_IN_PLACE = ("resize_as_", "abs_", "acos_", "arccos_", "asin_", "arcsin_", "atan_", "arctan_", "ceil_", "clamp_max_",
             "clamp_min_", "clip_", "cos_", "cosh_", "erf_", "erfc_", "exp_", "exp2_", "expm1_", "fix_", "floor_",
             "frac_", "log_", "log10_", "log1p_", "log2_", "logit_", "nan_to_num_", "neg_", "negative_", "reciprocal_",
             "round_", "rsqrt_", "sin_", "sinh_", "sqrt_", "square_", "tan_", "trunc_", "xlogy_", "fill_", "zero_",
             "detach_", "detach")


def _method_function(name):
    def fn(input, *args, **kwargs):
        if not isinstance(input, _C.TensorBase):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}(input, ...): input.{name}(...)."
    return fn


for _name in _IN_PLACE:
    globals()[_name] = _method_function(_name)
__all__ += list(_IN_PLACE) + ["fill"]


def fill(input, value):
    """A copy of input with every entry value (torch.fill, out of place)."""
    if not isinstance(input, _C.TensorBase):
        raise TypeError(f"fill(): argument 'input' must be Tensor, not {type(input).__name__}")
    filled = input.detach().clone().fill_(value)
    if not input.requires_grad:
        return filled
    never = input.detach().new_zeros(tuple(input.shape), dtype="bool")
    return _where(never, input, filled)  # in the graph with a zero gradient for input, as in PyTorch


# Tensor methods PyTorch has for functions of _core/creation_more.py, which imports the Tensor class (so the class
# cannot import them without a cycle), and of nn.functional (a layer above the class): attached here, once the
# package is whole.
def _histc_method(self, bins=100, min=0, max=0):  # noqa: A002  (PyTorch's names)
    return _histc(self, bins, min, max)


def _multinomial_method(self, num_samples, replacement=False, *, generator=None):
    return _multinomial(self, num_samples, replacement, generator=generator)


def _hardshrink_method(self, lambd=0.5):
    return F.hardshrink(self, lambd)


_histc_method.__name__, _multinomial_method.__name__, _hardshrink_method.__name__ = "histc", "multinomial", \
    "hardshrink"
_Tensor.histc, _Tensor.multinomial, _Tensor.hardshrink = _histc_method, _multinomial_method, _hardshrink_method


class _TriangularSolveResult(tuple):
    """torch.triangular_solve's result: (solution, cloned_coefficient), by position or by name."""

    def __new__(cls, solution, cloned_coefficient):
        return super().__new__(cls, (solution, cloned_coefficient))

    solution = property(lambda self: self[0])
    cloned_coefficient = property(lambda self: self[1])


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """PyTorch's (deprecated, still common in Gaussian-process code) torch.triangular_solve: X with A X = b, or
    A^T X = b with transpose, A triangular; (solution, a copy of A). torch.linalg.solve_triangular underneath."""
    from .linalg import solve_triangular  # noqa: E402  (linalg is a library this face module sits above)
    if out is not None:
        raise TypeError("triangular_solve: out= is not supported by gpumemnet; use the returned tensors")
    for name, t in (("b", b), ("A", A)):
        if not isinstance(t, _Tensor):
            raise TypeError(f"triangular_solve(): argument '{name}' must be Tensor, not {type(t).__name__}")
        if t.ndim < 2:
            raise RuntimeError(f"triangular_solve: Expected {name} to have at least 2 dimensions, but it has {t.ndim} "
                               f"dimensions instead (shape {tuple(t.shape)})")
    if b.dtype != A.dtype:  # solve_triangular would convert b; this older form refuses, as PyTorch's
        raise RuntimeError(f"triangular_solve: Expected b and A to have the same dtype, but found b of type "
                           f"{_SCALAR_TYPE_NAMES[b._dtype]} and A of type {_SCALAR_TYPE_NAMES[A._dtype]} instead.")
    coef = A.mT if transpose else A
    return _TriangularSolveResult(solve_triangular(coef, b, upper=bool(upper) != bool(transpose),
                                                   unitriangular=unitriangular), A.clone())


def mvlgamma(input, p):
    """torch.mvlgamma: torch.special.multigammaln's other name."""
    from .special import multigammaln  # noqa: E402
    return multigammaln(input, p)


def igamma(input, other):
    """torch.igamma: torch.special.gammainc's other name (the regularised lower incomplete gamma function)."""
    from .special import gammainc  # noqa: E402
    return gammainc(input, other)


def igammac(input, other):
    """torch.igammac: torch.special.gammaincc's other name."""
    from .special import gammaincc  # noqa: E402
    return gammaincc(input, other)


_Tensor.triangular_solve = lambda self, A, upper=True, transpose=False, unitriangular=False: triangular_solve(
    self, A, upper, transpose, unitriangular)
_Tensor.mvlgamma = lambda self, p: mvlgamma(self, p)
_Tensor.igamma = lambda self, other: igamma(self, other)
_Tensor.igammac = lambda self, other: igammac(self, other)
__all__ += ["triangular_solve", "mvlgamma", "igamma", "igammac"]


def _standard_gamma(alpha, generator=None):
    """torch._standard_gamma: Gamma(alpha, 1) draws, differentiable in alpha (torch.distributions' own sampler)."""
    from .distributions.gamma import _standard_gamma as draw  # noqa: E402
    with _drawing_from(generator):
        return draw(alpha)


def _sample_dirichlet(alpha, generator=None):
    """torch._sample_dirichlet (torchvision's AugMix mixes with it): Dirichlet(alpha) draws over the last dim."""
    g = _standard_gamma(alpha, generator)
    return g / g.sum(-1, keepdim=True)


def _standard_gamma_grad(self, output):
    """torch._standard_gamma_grad(alpha, x): dx/dalpha of a Gamma(alpha, 1) draw x (the reparameterization gradient
    that _standard_gamma's backward uses), in alpha's dtype."""
    from .distributions.gamma import _standard_gamma_grad as grad  # noqa: E402
    return grad(self, output).to(self.dtype)


__all__ += ["_standard_gamma", "_sample_dirichlet", "_standard_gamma_grad"]


def conv_tbc(input, weight, bias, pad=0):
    """torch.conv_tbc (fairseq's ConvTBC): a 1-D convolution of a (time, batch, channels) input with a (kernel,
    in, out) weight and `pad` zeros at each end of time; the same conv1d in the other layout."""
    for name, t in (("self", input), ("weight", weight), ("bias", bias)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"conv_tbc(): argument '{name}' must be Tensor, not {type(t).__name__}")
    for t, want, what in ((input, 3, "Input must have 3 dims: time, batch, in_channel"),
                          (weight, 3, "Weight tensor must have 3 dims: kernel_width, in_channels, out_channels."),
                          (bias, 1, "Bias must have 1 dim: out_channels")):
        if t.ndim != want:
            raise RuntimeError(f"conv_tbc: {what} (shapes: input {tuple(input.shape)}, weight {tuple(weight.shape)}, "
                               f"bias {tuple(bias.shape)})")
    out = F.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


def orgqr(input, tau):
    """torch.orgqr: the Q of geqrf's reflectors, linalg.householder_product."""
    return _linalg.householder_product(input, tau)


def ormqr(input, tau, other, left=True, transpose=False):
    """torch.ormqr: Q @ other (left=False: other @ Q; transpose: Q^T), Q the whole m x m product of the reflectors
    in input's columns (zero columns and zero taus beyond them are reflections that change nothing)."""
    m, n, k = input.shape[-2], input.shape[-1], tau.shape[-1]
    side = -2 if left else -1
    if other.shape[side] != m:
        raise RuntimeError(f"torch.ormqr: other.shape[{side}] must be equal to input.shape[-2] (got "
                           f"{other.shape[side]} and {m})")
    full = F.pad(input, (0, m - n)) if m > n else input
    q = _linalg.householder_product(full, F.pad(tau, (0, m - k)) if m > k else tau)
    q = q.mT if transpose else q
    return q @ other if left else other @ q


__all__ += ["conv_tbc", "orgqr", "ormqr"]
