"""Argument forms PyTorch's argument parser takes that a plain Python signature does not: NumPy's names `axis=`
for `dim` and `keepdims=` for `keepdim` (every native function with those parameters takes them), and NumPy
integer scalars wherever an int goes (a dim, a size, an index). Scripts written against NumPy habits
(`x.sum(axis=1)`, `x.mean(1, keepdims=True)`, a dim read out of an np.int64 array) run unchanged under PyTorch.

The hot methods (tensor_reduce.py's reductions, softmax, squeeze, cat ...) take `axis=`/`keepdims=` as keyword-only
parameters of their own and call dim_args only when one is given or the dim is not a plain int / None, so their
common path costs one comparison. The other methods that take a dim are wrapped once by install() (numpy_forms):
those are composite ops of several microseconds, where the wrapper's fraction of a microsecond does not show."""
import numpy as np

from .. import _C

_INT_CODES = frozenset((4, 6, 7, 8, 9))  # int64, uint8, int8, int16, int32 (_core/dtype.py's codes)
_NO = object()  # the default of axis= / keepdims=: "not given" (None is a meaningful dim)
PLAIN_DIMS = frozenset((int, type(None)))  # dim types the C layer takes as they are

# Tensor methods that take `dim` in Python in PyTorch (torch/_tensor.py, torch/functional.py), not through its
# argument parser: they refuse axis= / keepdims= there, and so do we.
_PYTHON_LEVEL = frozenset(("norm", "split", "unique", "unique_consecutive", "unflatten", "stft", "istft", "lu"))


def as_int(v):
    """v as a Python int where it stands for one: a NumPy integer, or a one-element integer tensor (PyTorch takes
    either wherever an int goes, through __index__: captum pads by np.int64s, draws k as a 0-d tensor). Anything
    else (a bool, a float, a list) comes back as it is, for the caller's own check and message."""
    t = type(v)
    if t is int or t is bool:
        return v
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, _C.TensorBase) and v._dtype in _INT_CODES and v.numel() == 1:
        return int(v.item())
    return v


def plain(v):
    """v with NumPy integer scalars made ints (also inside a tuple or list of dims / sizes); anything else as is,
    for the op to accept or refuse as before (a NumPy bool is no int to PyTorch either)."""
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (tuple, list)) and any(isinstance(i, np.integer) for i in v):
        return type(v)(int(i) if isinstance(i, np.integer) else i for i in v)
    return v


def _has_numpy_int(args, kwargs):
    for v in (*args, *kwargs.values()):
        if isinstance(v, np.integer) or (isinstance(v, (tuple, list)) and
                                         any(isinstance(i, np.integer) for i in v)):
            return True
    return False


def _alias(op, given, alias, value, default):
    """The value of a parameter also given by its NumPy name: PyTorch refuses both at once."""
    if value is _NO:
        return given
    if given is not default:
        raise TypeError(f"{op}() got multiple values for argument '{alias}'")
    return value


# Reductions whose empty dim list reduces every dim, as PyTorch's do (`x.sum(dim=())` is the total). Our own code
# passes dims it computed (a gradient summed over the broadcast dims) only when there is at least one.
_EMPTY_DIMS_MEAN_ALL = frozenset(("sum", "mean", "amax", "amin", "var", "std", "nansum", "nanmean", "count_nonzero",
                                  "norm"))


def dim_args(op, dim, keepdim, axis=_NO, keepdims=_NO, default_dim=None):
    """(dim, keepdim) of a hot method called with axis= / keepdims= or a dim that is not an int or None."""
    dim = plain(as_int(_alias(op, dim, "dim", axis, default_dim)))
    if op in _EMPTY_DIMS_MEAN_ALL and isinstance(dim, (tuple, list)) and not dim:
        dim = None
    return dim, _alias(op, keepdim, "keepdim", keepdims, False)


def required_dim(op, dim, axis):
    """The dim of a method whose dim PyTorch requires (softmax, unsqueeze), given as dim or axis=."""
    dim = dim_args(op, dim, False, axis)[0]
    if dim is None:
        raise TypeError(f"{op}() missing 1 required positional argument: 'dim'")
    return dim


def renamed(op, kwargs):
    """kwargs with axis= / keepdims= under PyTorch's names (a TypeError, as PyTorch's, when both are given)."""
    kwargs = dict(kwargs)
    for numpy_name, name in (("axis", "dim"), ("keepdims", "keepdim")):
        if numpy_name in kwargs:
            if name in kwargs:
                raise TypeError(f"{op}() got multiple values for argument '{name}'")
            kwargs[name] = kwargs.pop(numpy_name)
    return kwargs


def numpy_forms(fn, aliases=True):
    """fn (a method or a function taking a dim) that also takes axis= / keepdims= (with aliases) and NumPy integer
    scalars: those are turned into ints only when fn refused the call, so the common path pays no scan."""
    def wrapper(*args, **kwargs):
        if kwargs and aliases and ("axis" in kwargs or "keepdims" in kwargs):
            kwargs = renamed(fn.__name__, kwargs)
        try:
            return fn(*args, **kwargs)
        except (TypeError, IndexError):
            if not _has_numpy_int(args, kwargs):
                raise
        return fn(*[plain(a) for a in args], **{k: plain(v) for k, v in kwargs.items()})
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(wrapper, attr, getattr(fn, attr, None))
    wrapper.__wrapped__ = fn
    return wrapper


def _takes_dim(fn):
    code = getattr(fn, "__code__", None)
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount] if code else ()
    return ("dim" in names or "keepdim" in names) and "axis" not in names and "keepdims" not in names


def install(cls, skip=()):
    """Wrap every method of cls that takes `dim` or `keepdim` (and does not take axis= itself) in numpy_forms;
    `skip`: the names that handle the forms themselves."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("__") or name in skip or not callable(fn) or not _takes_dim(fn):
            continue
        setattr(cls, name, numpy_forms(fn, aliases=name not in _PYTHON_LEVEL))


def squeeze_dims(t, dims):
    """t.squeeze(dims) for a tuple or list of dims (PyTorch >= 2.0): those of size 1 dropped, the others kept;
    one squeeze per dim, the highest first so that the lower ones keep their places."""
    n = max(t.ndim, 1)
    wrapped = []
    for d in dims:
        d = plain(d)
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"squeeze(): argument 'dim' must be tuple of ints, but found element of type "
                            f"{type(d).__name__}")
        if not -n <= d < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
        if d % n in wrapped:
            raise RuntimeError(f"dim {d % n} appears multiple times in the list of dims")
        wrapped.append(d % n)
    for d in sorted(wrapped, reverse=True):
        t = t.squeeze(d)
    return t if wrapped else t.view(tuple(t.shape))  # squeeze(()) is a view of all of t, as PyTorch's
