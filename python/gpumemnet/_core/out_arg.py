"""`out=` on the functions of the gpumemnet (torch) namespace (and the factories' layout= and memory_format=):
`torch.add(a, b, out=c)`, `torch.cat(xs, out=buf)`, `torch.max(x, 1, out=(values, indices))`,
`torch.zeros(2, 3, out=t)`, as PyTorch takes them.

The result is computed as without `out`, then written into `out` (resized, with PyTorch's warning, when its shape
differs; cast when PyTorch's casting rule allows), and `out` is returned. So `out=` saves no memory here: the
result exists for a moment beside `out`. PyTorch's rules kept: no autograd through `out=` (RuntimeError when the
result would require grad), `out` on the result's device, no cast from floating point into an integer `out`."""
import functools
import warnings

from .. import _C
from .autograd import is_grad_enabled, no_grad
from .dtype import SCALAR_TYPE_NAMES, bool_

# PyTorch's functions that take out= (read off torch's docstrings, 2.15) that gpumemnet has
FUNCTIONS = (
    "abs acos acosh add addbmm addcdiv addcmul addmm addmv addr all amax amin aminmax any argmax argmin asin asinh "
    "atan atan2 atanh baddbmm bernoulli bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift "
    "bitwise_xor bmm bucketize cat ceil chain_matmul cholesky_inverse cholesky_solve clamp clamp_max clamp_min clip "
    "column_stack concat concatenate copysign cos cosh cross cummax cummin cumprod cumsum deg2rad diag diff digamma "
    "div divide dot dstack eq erf erfc erfinv exp exp2 expm1 fix float_power floor floor_divide fmax fmin fmod frac "
    "gather gcd ge ger greater greater_equal gt heaviside histc histogram hstack hypot i0 index_select inner "
    "inverse isneginf isposinf kron kthvalue lcm ldexp le lerp less less_equal lgamma log log10 log1p log2 logaddexp "
    "logaddexp2 logcumsumexp logical_and logical_not logical_or logical_xor logit logsumexp lt lu lu_solve lu_unpack "
    "masked_select matmul matrix_power max maximum mean median min minimum mm mode msort mul multinomial multiply mv "
    "nan_to_num nanmean nanmedian nanquantile nansum narrow_copy ne neg negative nonzero norm normal not_equal outer "
    "polygamma pow prod quantile rad2deg reciprocal remainder renorm round row_stack rsqrt searchsorted sgn sigmoid "
    "sign signbit sin sinc sinh sort sqrt square stack std std_mean sub subtract sum svd take_along_dim tan tanh topk "
    "tril triu true_divide trunc var var_mean vdot vstack where xlogy "
    "alias_copy angle diagonal_copy expand_copy frexp hardshrink index_add index_copy index_reduce "
    "isin log_softmax mvlgamma permute_copy scatter scatter_add scatter_reduce slice_scatter softmax squeeze_copy "
    "t_copy take tensordot transpose_copy unfold_copy unsqueeze_copy view_copy").split()
# ... and those that make a tensor from sizes or a range: its dtype and device default to out's
CREATION = "arange empty eye full linspace logspace ones rand randint randn randperm range zeros".split()
# The factories (those above and the *_like ones) also take PyTorch's layout= (strided, the only layout here) and
# memory_format= (accepted and a no-op: gpumemnet keeps NCHW, as Tensor.to(memory_format=) does)
LIKE = "empty_like full_like ones_like rand_like randint_like randn_like zeros_like".split()


def write_out(name, r, out, stacklevel=4):
    """r written into out as PyTorch's out= does (the checks, the resize and its warning, the cast); returns out."""
    if not isinstance(out, _C.TensorBase):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if is_grad_enabled() and (r.requires_grad or out.requires_grad):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           f"but one of the arguments requires grad (call it without out=, or under no_grad())")
    if out.device != r.device:
        raise RuntimeError(f"{name}(): Expected out tensor to have device {r.device}, but got {out.device} instead")
    if (r.dtype.is_floating_point and not out.dtype.is_floating_point) or (r.dtype != bool_ and out.dtype == bool_):
        raise RuntimeError(f"{name}(): result type {SCALAR_TYPE_NAMES[r._dtype]} can't be cast to the desired "
                           f"output type {SCALAR_TYPE_NAMES[out._dtype]}")
    if tuple(out.shape) != tuple(r.shape):
        if out.numel() != 0:
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                          f"which does not match the required output shape {list(r.shape)}. This behavior is "
                          f"deprecated, and in a future PyTorch release outputs will not be resized unless they have "
                          f"zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                          f"elements with t.resize_(0).", UserWarning, stacklevel=stacklevel)
        out.resize_(tuple(r.shape))
    with no_grad():
        out.copy_(r)
    return out


def _write(name, r, out):
    if not isinstance(r, tuple):
        return write_out(name, r, out, stacklevel=5)
    if not isinstance(out, (tuple, list)) or len(out) != len(r):
        raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(r)} Tensors")
    written = [write_out(name, ri, oi, stacklevel=5) for ri, oi in zip(r, out)]
    return type(r)(*written) if hasattr(r, "_fields") else tuple(written)  # the named tuple (values, indices)


def _factory_kwargs(name, kwargs):
    layout = kwargs.pop("layout", None)
    kwargs.pop("memory_format", None)
    if layout is not None and getattr(layout, "name", None) != "strided":  # its printed name follows the alias
        raise NotImplementedError(f"{name}(): layout={layout} is not supported: gpumemnet has dense (strided) "
                                  f"tensors only")


def _with_out(name, fn, creation):
    sizes_first = name in ("zeros", "ones", "empty", "rand", "randn")  # (*size, ...), which also take size=

    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        if creation:
            _factory_kwargs(name, kwargs)
            if sizes_first and not args and "size" in kwargs:  # torch.zeros(size=(2, 3)) (timm's BEiT)
                args = (kwargs.pop("size"),)
        if out is None:
            return fn(*args, **kwargs)
        if creation and isinstance(out, _C.TensorBase):
            kwargs.setdefault("dtype", out.dtype)
            kwargs.setdefault("device", out.device)
        return _write(name, fn(*args, **kwargs), out)
    return wrapper


def _with_factory_kwargs(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _factory_kwargs(name, kwargs)
        return fn(*args, **kwargs)
    return wrapper


def install(namespace):
    """Give every function of FUNCTIONS and CREATION in `namespace` (gpumemnet's globals) an out= argument, and
    the factories (CREATION, LIKE) layout= and memory_format=."""
    for names, creation in ((FUNCTIONS, False), (CREATION, True)):
        for name in names:
            if name in namespace:
                namespace[name] = _with_out(name, namespace[name], creation)
    for name in LIKE:
        if name in namespace:
            namespace[name] = _with_factory_kwargs(name, namespace[name])
