"""gm.foreach (layer 2): torch.foreach, and the torch._foreach_* names it replaces (PyTorch 2.15), which EMA and
optimizer code written for PyTorch calls (timm's ModelEmaV3: `torch._foreach_lerp_(ema, params, weight=1 - decay)`).

Each function applies the Tensor op of its name at every list position, as PyTorch defines them: the out-of-place
ones return a tuple of results, the in-place ones (ending in _) write every tensor and return the very container
they were given. The second operand may be one number or tensor shared by all positions, or a list or tuple of them
of the same length. gpumemnet runs them one tensor at a time (its kernels are elementwise already; a fused
multi-tensor kernel would save the per-op overhead, not memory)."""
import numbers

from ._core.tensor import Tensor

UNARY = ("abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p log2 neg reciprocal "
         "round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc").split()
BINARY = "add sub mul div pow maximum minimum clamp_max clamp_min".split()
TERNARY = "addcmul addcdiv lerp".split()
_NO_INPLACE_METHOD = ("maximum", "minimum")  # Tensor has no maximum_: written with copy_


def _tensors(name, inputs):
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(t, Tensor) for t in inputs):
        raise TypeError(f"foreach.{name}: inputs must be a list or tuple of Tensors, got {type(inputs).__name__}")
    if not inputs:
        raise RuntimeError(f"foreach.{name}: Tensor list must have at least one tensor.")
    return inputs


def _per_position(name, inputs, arg, what):
    """arg for every position: itself when shared (a number or a tensor), else its items (a list of the same length)."""
    if isinstance(arg, (list, tuple)):
        if len(arg) != len(inputs):
            raise RuntimeError(f"foreach.{name}: Tensor list must have same number of elements as {what} list "
                               f"(got {len(inputs)} and {len(arg)}).")
        return arg
    if not isinstance(arg, (numbers.Number, Tensor)):
        raise TypeError(f"foreach.{name}: {what} must be a number, a Tensor or a list of them, got "
                        f"{type(arg).__name__}")
    return [arg] * len(inputs)


def _apply(inplace, inputs, results):
    if not inplace:
        return tuple(results)
    for t, r in zip(inputs, results):
        if r is not t:
            t.copy_(r)
    return inputs


def _unary(name, inplace):
    def fn(inputs):
        _tensors(name, inputs)
        method = name + "_" if inplace else name
        return _apply(inplace, inputs, [getattr(t, method)() for t in inputs])
    fn.__name__ = name + ("_" if inplace else "")
    return fn


def _binary(name, inplace):
    def fn(inputs, other, *, alpha=None):
        if name == "pow" and not inplace and isinstance(inputs, numbers.Number):  # pow(2.0, exponents): 2 ** each
            return tuple(inputs ** t for t in _tensors(name, other))
        _tensors(name, inputs)
        others = _per_position(name, inputs, other, "scalar" if not isinstance(other, list) else "other")
        kw = {} if alpha is None else {"alpha": alpha}
        method = name + "_" if inplace and name not in _NO_INPLACE_METHOD else name
        return _apply(inplace, inputs, [getattr(t, method)(o, **kw) for t, o in zip(inputs, others)])
    fn.__name__ = name + ("_" if inplace else "")
    return fn


def _ternary(name, inplace):
    def fn(inputs, second, third=None, scalars=None, *, value=None, weight=None):
        _tensors(name, inputs)
        # the value as PyTorch's overloads take it: a number, one per position (a list, or a 1-D tensor of them)
        value = scalars if scalars is not None else value
        if isinstance(value, Tensor) and value.ndim == 1:
            value = value.tolist()
        seconds = _per_position(name, inputs, second, "tensor")
        if name == "lerp":
            w = _per_position(name, inputs, weight if third is None else third, "weight")
            call = [getattr(t, name + "_" if inplace else name)(s, wi) for t, s, wi in zip(inputs, seconds, w)]
        else:
            thirds = _per_position(name, inputs, third, "tensor")
            v = _per_position(name, inputs, 1 if value is None else value, "scalar")
            call = [getattr(t, name + "_" if inplace else name)(s, u, value=vi)
                    for t, s, u, vi in zip(inputs, seconds, thirds, v)]
        return _apply(inplace, inputs, call)
    fn.__name__ = name + ("_" if inplace else "")
    return fn


def clone(inputs):
    return tuple(t.clone() for t in _tensors("clone", inputs))


def copy_(inputs, src, non_blocking=False):
    for t, s in zip(_tensors("copy_", inputs), _per_position("copy_", inputs, src, "src")):
        t.copy_(s, non_blocking=non_blocking)
    return inputs


def zero_(inputs):
    for t in _tensors("zero_", inputs):
        t.zero_()
    return inputs


def norm(inputs, ord=2, dtype=None):  # noqa: A002  (PyTorch's name)
    return tuple(t.norm(p=ord, dtype=dtype) if dtype is not None else t.norm(p=ord) for t in _tensors("norm", inputs))


def max(inputs):  # noqa: A001  (PyTorch's name)
    return tuple(t.max() for t in _tensors("max", inputs))


for _names, _make in ((UNARY, _unary), (BINARY, _binary), (TERNARY, _ternary)):
    for _n in _names:
        globals()[_n] = _make(_n, False)
        globals()[_n + "_"] = _make(_n, True)

__all__ = [n + s for n in UNARY + BINARY + TERNARY for s in ("", "_")] + ["clone", "copy_", "zero_", "norm", "max"]
# torch._foreach_add_ and the rest: the names PyTorch keeps for compatibility (gm's namespace exports them)
PRIVATE = {f"_foreach_{n}": globals()[n] for n in __all__}
