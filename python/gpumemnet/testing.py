"""gm.testing (layer 2): torch.testing's assert_close, make_tensor and the deprecated assert_allclose.

assert_close follows PyTorch's rules: the inputs are paired up (sequences element by element, mappings key by key,
dataclasses field by field), each pair is None/None, bool/bool, number/number or tensor-like/tensor-like
(tensors, NumPy arrays, anything as_tensor takes, of directly related types), and the first pair that fails
raises AssertionError with the same facts as PyTorch's message (mismatched elements, greatest absolute and
relative difference and where). Inputs no pair can take raise TypeError, a lone rtol or atol ValueError.
gpumemnet has no complex, quantized or sparse tensors: those branches of PyTorch's comparison do not exist here."""
import cmath
import collections.abc
import contextlib
import dataclasses
import math
import warnings

import numpy as np

from . import _C
from ._core.creation import as_tensor, empty, randint, tensor
from ._core.dtype import (bfloat16, bool_, finfo, float16, float32, float64, iinfo, int8, int16, int32, int64,
                          preserve_format, uint8)
from ._core.tensor_misc import promote_types
from ._core.size import Size

__all__ = ["assert_close", "make_tensor", "assert_allclose"]

# PyTorch's default (rtol, atol) per dtype; every other dtype compares exactly. Python numbers use their
# dtype's: int -> int64, float -> float64, complex -> complex128.
_PRECISIONS = {"float16": (1e-3, 1e-5), "bfloat16": (0.016, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex32": (1e-3, 1e-5), "complex64": (1.3e-6, 1e-5),
               "complex128": (1e-7, 1e-7)}
_NUMBER_DTYPES = {int: "int64", float: "float64", complex: "complex128"}


class _Failure(Exception):
    """A failed check: the exception type to raise, its message and the item (path into nested inputs)."""

    def __init__(self, exc_type, text, item=()):
        super().__init__(text)
        self.exc_type, self.text, self.item = exc_type, text, item

    def error(self, msg=None):
        """The user-facing exception; msg (a str) replaces the message, a callable rewrites it."""
        if isinstance(msg, str):
            return self.exc_type(msg)
        text = self.text
        if self.item:
            text += "\n\nThe failure occurred for item " + "".join(str([i]) for i in self.item)
        return self.exc_type(msg(text) if callable(msg) else text)


def _tolerances(names, rtol, atol, item):
    """(rtol, atol): both given, or the loosest defaults of the dtypes named; one alone is a ValueError."""
    if (rtol is None) != (atol is None):
        raise _Failure(ValueError, "Both 'rtol' and 'atol' must be either specified or omitted, "
                                   f"but got no {'rtol' if rtol is None else 'atol'}.", item)
    if rtol is not None:
        return rtol, atol
    pairs = [_PRECISIONS.get(n, (0.0, 0.0)) for n in names]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _diff_message(identifier, extra, abs_diff, abs_idx, atol, rel_diff, rel_idx, rtol):
    """PyTorch's mismatch text: 'equal' when both tolerances are 0, else 'close' with the allowed amounts."""
    equality = rtol == 0 and atol == 0

    def line(kind, diff, idx, tol):
        text = f"{kind.title()} difference: {diff}" if idx is None else f"Greatest {kind} difference: {diff} at " \
                                                                         f"index {idx}"
        return text + ("" if equality else f" (up to {tol} allowed)") + "\n"

    text = f"{identifier} are not {'equal' if equality else 'close'}!\n\n{extra.strip()}\n"
    text += line("absolute", abs_diff, abs_idx, atol) + line("relative", rel_diff, rel_idx, rtol)
    return text.strip()


def _scalar_message(actual, expected, rtol, atol):
    abs_diff = abs(actual - expected)
    rel_diff = math.inf if expected == 0 else abs_diff / abs(expected)
    return _diff_message("Scalars", f"Expected {expected} but got {actual}.", abs_diff, None, atol, rel_diff, None,
                         rtol)


def _tensor_message(actual, expected, matches, rtol, atol):
    """Counts the mismatches and finds the greatest differences among them (integers widened to int64 first, so
    that a difference cannot wrap)."""
    shape = tuple(matches.shape)
    total = matches.numel()
    bad = total - int(matches.long().sum().item())
    extra = f"Mismatched elements: {bad} / {total} ({bad / total:.1%})"
    a, e, m = actual.flatten(), expected.flatten(), matches.flatten()
    if not a.dtype.is_floating_point:
        a, e = a.to(int64), e.to(int64)
    abs_diff = (a - e).abs().masked_fill(m, 0)
    rel_diff = (abs_diff / e.abs()).masked_fill(m, 0)

    def greatest(t):
        value, index = t.max(0)
        flat, idx = int(index.item()), []
        for size in reversed(shape):
            flat, mod = divmod(flat, size)
            idx.append(mod)
        return value.item(), tuple(reversed(idx))

    (ad, ai), (rd, ri) = greatest(abs_diff), greatest(rel_diff)
    return _diff_message("Tensor-likes", extra, ad, ai, atol, rd, ri, rtol)


def _attribute_failure(name, a, e):
    return f"The values for attribute '{name}' do not match: {a} != {e}."


class _TensorPair:
    """Two tensor-likes: attributes first (shape, layout or stride, device, dtype), then the values."""

    def __init__(self, actual, expected, item, opts):
        self.actual, self.expected, self.item = actual, expected, item
        self.opts = opts
        self.rtol, self.atol = _tolerances((actual.dtype.name, expected.dtype.name), opts["rtol"], opts["atol"],
                                           item)

    def _fail(self, text):
        raise _Failure(AssertionError, text, self.item)

    def compare(self):
        a, e, o = self.actual, self.expected, self.opts
        if tuple(a.shape) != tuple(e.shape):
            self._fail(_attribute_failure("shape", Size(a.shape), Size(e.shape)))
        if a.layout != e.layout:
            if o["check_layout"]:
                self._fail(_attribute_failure("layout", a.layout, e.layout))
        elif o["check_stride"] and tuple(a.stride()) != tuple(e.stride()):
            self._fail(_attribute_failure("stride()", tuple(a.stride()), tuple(e.stride())))
        if o["check_device"] and a.device != e.device:
            self._fail(_attribute_failure("device", a.device, e.device))
        if o["check_dtype"] and a.dtype != e.dtype:
            self._fail(_attribute_failure("dtype", a.dtype, e.dtype))
        if "meta" in (a.device.type, e.device.type):
            return  # no values: the attributes are all there is to compare
        a, e = a.detach(), e.detach()
        if a.device != e.device:
            a, e = a.cpu(), e.cpu()
        if a.dtype != e.dtype:
            common = promote_types(a.dtype, e.dtype)
            a, e = a.to(common), e.to(common)
        matches = self._isclose(a, e)
        if bool(matches.all()):
            return
        if a.ndim == 0:
            self._fail(_scalar_message(a.item(), e.item(), self.rtol, self.atol))
        self._fail(_tensor_message(a, e, matches, self.rtol, self.atol))

    def _isclose(self, a, e):
        # PyTorch's isclose compares bools as the default float dtype; the narrow integers have no arithmetic
        # here, so they are widened (the values are the same)
        if a.dtype == bool_:
            a, e = a.to(float32), e.to(float32)
        elif not a.dtype.is_floating_point and a.dtype != int64:
            a, e = a.to(int64), e.to(int64)
        return a.isclose(e, rtol=self.rtol, atol=self.atol, equal_nan=self.opts["equal_nan"])


class _ScalarPair:
    """None/None, bool/bool (np.bool_ too) or number/number (NumPy numbers too)."""

    def __init__(self, kind, actual, expected, item, opts):
        self.kind, self.actual, self.expected, self.item, self.opts = kind, actual, expected, item, opts
        if kind == "number":
            self.rtol, self.atol = _tolerances([_NUMBER_DTYPES[type(x)] for x in (actual, expected)],
                                               opts["rtol"], opts["atol"], item)

    def compare(self):
        a, e = self.actual, self.expected
        if self.kind == "none":
            if not (a is None and e is None):
                raise _Failure(AssertionError, f"None mismatch: {a} is not {e}", self.item)
            return
        if self.kind == "bool":
            if a is not e:
                raise _Failure(AssertionError, f"Booleans mismatch: {a} is not {e}", self.item)
            return
        if self.opts["check_dtype"] and type(a) is not type(e):
            raise _Failure(AssertionError, f"The (d)types do not match: {type(a)} != {type(e)}.", self.item)
        if a == e or (self.opts["equal_nan"] and cmath.isnan(a) and cmath.isnan(e)):
            return
        diff = abs(a - e)
        if cmath.isfinite(diff) and diff <= self.atol + self.rtol * abs(e):
            return
        raise _Failure(AssertionError, _scalar_message(a, e, self.rtol, self.atol), self.item)


class _ObjectPair:
    """A dataclass whose == gives a bool: compared with ==, as PyTorch does."""

    def __init__(self, actual, expected, item):
        self.actual, self.expected, self.item = actual, expected, item

    def compare(self):
        if not self.actual == self.expected:
            raise _Failure(AssertionError, f"{self.actual} != {self.expected}", self.item)


def _leaf_pair(actual, expected, item, opts):
    """The pair for two non-container inputs, tried in PyTorch's order: None, bool, number, tensor-like."""
    if actual is None or expected is None:
        return _ScalarPair("none", actual, expected, item, opts)
    if all(isinstance(x, (bool, np.bool_)) for x in (actual, expected)):
        return _ScalarPair("bool", bool(actual), bool(expected), item, opts)
    if all(isinstance(x, (int, float, complex, np.number)) for x in (actual, expected)):
        a, e = (x.item() if isinstance(x, np.number) else x for x in (actual, expected))
        if isinstance(a, bool) or isinstance(e, bool):
            # PyTorch fails inside its number pair here (bool has no dtype among the numbers): RuntimeError
            raise RuntimeError(f"assert_close: cannot compare the bool {a if isinstance(a, bool) else e!r} with "
                               f"the number {e if isinstance(a, bool) else a!r}: compare bool with bool, or "
                               "convert the bool with int()")
        return _ScalarPair("number", a, e, item, opts)
    related = isinstance(actual, type(expected)) or isinstance(expected, type(actual))
    if related and (opts["allow_subclasses"] or type(actual) is type(expected)):
        try:
            a, e = (x if isinstance(x, _C.TensorBase) else as_tensor(x) for x in (actual, expected))
        except Exception:  # noqa: BLE001 - not tensor-like: no pair takes it (the TypeError below)
            a = None
        if a is not None:
            return _TensorPair(a, e, item, opts)
    raise _Failure(TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} and "
                              f"{type(expected)}.", item)


def _is_sequence(x):
    return isinstance(x, collections.abc.Sequence) and not isinstance(x, str)


def _is_dataclass_instance(x):
    return not isinstance(x, (type, _C.TensorBase, np.ndarray, np.generic)) and dataclasses.is_dataclass(x)


def _pairs(actual, expected, item, opts):
    """Every leaf pair of the two (nested) inputs, in order; structural mismatches fail here."""
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Failure(AssertionError, f"The length of the sequences mismatch: {len(actual)} != "
                                           f"{len(expected)}", item)
        out = []
        for i in range(len(actual)):
            out += _pairs(actual[i], expected[i], (*item, i), opts)
        return out
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        ka, ke = set(actual.keys()), set(expected.keys())
        if ka != ke:
            raise _Failure(AssertionError, "The keys of the mappings do not match:\n"
                                           f"Missing keys in the actual mapping: {sorted(ke - ka)}\n"
                                           f"Additional keys in the actual mapping: {sorted(ka - ke)}", item)
        keys = ka
        with contextlib.suppress(Exception):  # sorted when the keys allow it: the first failure is deterministic
            keys = sorted(ka)
        out = []
        for k in keys:
            out += _pairs(actual[k], expected[k], (*item, k), opts)
        return out
    if (_is_dataclass_instance(actual) and _is_dataclass_instance(expected)
            and type(actual) is type(expected)):
        try:
            equal = actual == expected
        except RuntimeError:  # a tensor field has no single truth value: compare field by field
            equal = None
        if type(equal) is bool:
            return [_ObjectPair(actual, expected, item)]
        out = []
        for field in dataclasses.fields(actual):
            if field.compare:
                out += _pairs(getattr(actual, field.name), getattr(expected, field.name), (*item, field.name),
                              opts)
        return out
    return [_leaf_pair(actual, expected, item, opts)]


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raise AssertionError unless actual and expected are close: |actual - expected| <= atol + rtol * |expected|
    elementwise (infinities only equal to themselves, NaN only with equal_nan), with the same shape, and the same
    device, dtype, layout and stride where those checks are on. Default tolerances follow the dtype (float32:
    rtol 1.3e-6, atol 1e-5; float64 1e-7, 1e-7; float16 1e-3, 1e-5; bfloat16 1.6e-2, 1e-5; others exact).
    Sequences, mappings and dataclasses are compared element by element. msg: a str replacing the message of a
    failed comparison, or a callable given PyTorch's message and returning the one to raise."""
    __tracebackhide__ = True
    opts = dict(allow_subclasses=allow_subclasses, rtol=rtol, atol=atol, equal_nan=equal_nan,
                check_device=check_device, check_dtype=check_dtype, check_layout=check_layout,
                check_stride=check_stride)
    try:
        pairs = _pairs(actual, expected, (), opts)
    except _Failure as f:  # the structure or the types: PyTorch does not apply msg to these
        raise f.error() from None
    for pair in pairs:
        try:
            pair.compare()
        except _Failure as f:
            raise f.error(msg) from None


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """Deprecated since PyTorch 1.12 (FutureWarning): assert_close with check_dtype=False, equal_nan=True and
    looser default tolerances (float16 1e-3, 1e-3; float32 1e-4, 1e-5; float64 1e-5, 1e-8). A non-tensor expected
    is made a tensor of actual's dtype."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future "
                  "release. Please use `torch.testing.assert_close()` instead.", FutureWarning, stacklevel=2)
    if not isinstance(actual, _C.TensorBase):
        actual = tensor(actual)
    if not isinstance(expected, _C.TensorBase):
        expected = tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        table = {"float16": (1e-3, 1e-3), "float32": (1e-4, 1e-5), "float64": (1e-5, 1e-8)}
        pairs = [table.get(t.dtype.name, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True,
                 check_dtype=False, check_stride=False, msg=msg or None)


# ---- make_tensor ----------------------------------------------------------------------------------------------
_INTEGRAL = (uint8, int8, int16, int32, int64)
_FLOATING = (float16, bfloat16, float32, float64)


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of values drawn uniformly from [low, high): by default [0, 2) for bool, [0, 10) for uint8, [-9, 10)
    for the signed integers and [-9, 9) for floating dtypes; low and high are clamped to what the dtype
    represents (integers: low and high are rounded up). noncontiguous: a strided view (tensors of 2+ elements);
    exclude_zero: zeros become 1 (bool, integers) or the dtype's smallest normal number (finfo.tiny).
    memory_format is checked and accepted; the layout stays NCHW, as everywhere in gpumemnet (gm.channels_last)."""
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, but got "
                         f"noncontiguous={noncontiguous!r} and memory_format={memory_format!r}")
    integral = dtype is bool_ or dtype in _INTEGRAL
    if requires_grad and integral:
        raise ValueError("`requires_grad=True` is not supported for boolean and integral dtypes, but got "
                         f"dtype={dtype!r}")

    def bounds(lowest, highest_excl, default_low, default_high):
        lo = default_low if low is None else low
        hi = default_high if high is None else high
        if any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
            raise ValueError(f"`low` and `high` cannot be NaN, but got low={lo!r} and high={hi!r}")
        if lo == hi and dtype in _FLOATING:
            warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or complex types is "
                          "deprecated since 2.1 and will be removed in 2.3. Use `torch.full(...)` instead.",
                          FutureWarning, stacklevel=3)
        elif lo >= hi:
            raise ValueError(f"`low` must be less than `high`, but got {lo} >= {hi}")
        elif hi < lowest or lo >= highest_excl:
            raise ValueError(f"The value interval specified by `low` and `high` is [{lo}, {hi}), but {dtype} only "
                             f"supports [{lowest}, {highest_excl})")
        lo, hi = min(max(lo, lowest), highest_excl), min(max(hi, lowest), highest_excl)
        # integers: low rounded up keeps values >= low; randint's bound is exclusive, so high is rounded up too
        return (math.ceil(lo), math.ceil(hi)) if integral else (lo, hi)

    numel = 1
    for s in shape:
        numel *= s
    noncontiguous = noncontiguous and numel > 1
    if noncontiguous:  # twice the last dimension; every second element is taken below
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype is bool_:
        lo, hi = bounds(0, 2, 0, 2)
        result = randint(lo, hi, shape, device=device, dtype=dtype)
    elif dtype in _INTEGRAL:
        info = iinfo(dtype)
        # randint draws in int64, which cannot reach int64's largest value itself
        lo, hi = bounds(info.min, info.max + (1 if dtype is not int64 else 0), -9, 10)
        result = randint(lo, hi, shape, device=device, dtype=dtype)
    elif dtype in _FLOATING:
        info = finfo(dtype)
        lo, hi = bounds(info.min, info.max, -9, 9)
        result = empty(shape, device=device, dtype=dtype)
        if hi - lo >= info.max:  # uniform_ needs high - low representable: draw half the range, then double
            result.uniform_(lo / 2, hi / 2).mul_(2)
        else:
            result.uniform_(lo, hi)
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by torch.testing.make_tensor(): expected "
                        "one of bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64")
    if noncontiguous:
        result = result[..., 1::2]  # offset by one element, to catch offset bugs too
    elif memory_format is not None and memory_format is not preserve_format:
        # checked and accepted; gpumemnet keeps NCHW for every format (see gpumemnet.channels_last)
        result = result.contiguous(memory_format=memory_format)
    if exclude_zero:
        result.masked_fill_(result == 0, 1 if integral else finfo(dtype).tiny)
    if dtype in _FLOATING:
        result.requires_grad = requires_grad
    return result
