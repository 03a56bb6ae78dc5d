"""How a tensor prints: PyTorch's text, character for character, and torch.set_printoptions.

The rules are PyTorch's (torch/_tensor_str.py), written here from its documented behaviour:
- Above `threshold` elements the tensor is summarised: `edgeitems` rows / items at each end of every dimension,
  "..." between.
- One format for all the values shown, chosen from the nonzero finite ones among them:
  - integral floats print as "3." unless max/min > 1000 or max > 1e8;
  - other floats print with `precision` decimals unless max/min > 1000, max > 1e8 or min < 1e-4, which switch to
    scientific notation;
  - sci_mode True / False forces the choice.
- Every value is padded to the widest, and a row wraps at `linewidth`.
- The suffixes (device, dtype, grad_fn...) go on a new line when the last line would pass `linewidth`."""
import math

import numpy as np

from .. import _C
from .dtype import get_default_dtype

__all__ = ["set_printoptions"]  # tensor_repr is Tensor.__repr__


class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


PRINT_OPTS = _PrintOptions()
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """PyTorch's print settings, for every tensor printed from now on. profile ('default', 'short', 'full') sets
    the first four at once; the other arguments then override it. sci_mode None lets each tensor choose."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        (PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems,
         PRINT_OPTS.linewidth) = _PROFILES[profile]
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


class _Formatter:
    """One format for every value shown (see the module's docstring)."""

    def __init__(self, shown, floating):
        self.floating = floating
        self.int_mode, self.sci_mode, self.width = True, False, 1
        p = PRINT_OPTS.precision
        flat = shown.reshape(-1)
        if not floating:
            self.width = max((len(_plain(v)) for v in flat.tolist()), default=1)
        else:
            vals = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
            if vals.size:
                lo, hi = np.abs(vals).min(), np.abs(vals).max()
                self.int_mode = bool(np.all(vals == np.ceil(vals)))
                wide = hi > 1.0e8 or hi > lo * 1000.0  # (not hi / lo: 1e300 / 1e-310 overflows, and NumPy warns)
                self.sci_mode = wide if self.int_mode else (wide or lo < 1.0e-4)
                if PRINT_OPTS.sci_mode is not None:
                    self.sci_mode = PRINT_OPTS.sci_mode
                if self.sci_mode:
                    texts = (f"{v:.{p}e}" for v in vals.tolist())
                elif self.int_mode:
                    texts = (f"{v:.0f}." for v in vals.tolist())
                else:
                    texts = (f"{v:.{p}f}" for v in vals.tolist())
                self.width = max(len(t) for t in texts)

    def format(self, v):
        p = PRINT_OPTS.precision
        if not self.floating:
            text = _plain(v)
        elif self.sci_mode:
            text = f"{v:{self.width}.{p}e}"
        elif self.int_mode:
            text = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            text = f"{v:.{p}f}"
        return text.rjust(self.width)


def _plain(v):
    return str(v)  # ints and bools as Python prints them: 3, True


def _summarized(a, edge):
    """The values shown: edge items at each end of every dimension (all of a dimension not longer than 2 edge)."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * edge:
        a = np.concatenate([a[:edge], a[a.shape[0] - edge:]])
    if a.ndim == 1:
        return a
    return np.stack([_summarized(row, edge) for row in a]) if len(a) else a


def _vector(a, indent, summarize, fmt):
    edge = PRINT_OPTS.edgeitems
    per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / (fmt.width + 2))))
    if summarize and not edge:
        items = ["..."]
    elif summarize and a.shape[0] > 2 * edge:
        items = ([fmt.format(v) for v in a[:edge].tolist()] + [" ..."] +
                 [fmt.format(v) for v in a[a.shape[0] - edge:].tolist()])
    else:
        items = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    edge = PRINT_OPTS.edgeitems
    if summarize and not edge:
        return "[...]"
    if summarize and a.shape[0] > 2 * edge:
        rows = ([_nested(a[i], indent + 1, summarize, fmt) for i in range(edge)] + ["..."] +
                [_nested(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0] - edge, a.shape[0])])
    else:
        rows = [_nested(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def values_str(t, indent):
    """The bracketed values of a CPU/CUDA tensor with data (bfloat16 read as float32: NumPy has no bfloat16)."""
    arr = _C.TensorBase.numpy(t if t._dtype != 3 else t.float())
    summarize = arr.size > PRINT_OPTS.threshold
    floating = arr.dtype.kind == "f"
    fmt = _Formatter(_summarized(arr, PRINT_OPTS.edgeitems) if summarize else arr, floating)
    return _nested(arr, indent, summarize, fmt)


def with_suffixes(text, suffixes, indent):
    """text + ", suffix" for each, starting a new line where the last line would pass linewidth."""
    parts = [text]
    last = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            parts.append(", " + s)
            last += len(s) + 2
    return "".join(parts) + ")"


def tensor_repr(t, subclass=False, tensor_contents=None):
    """Tensor.__repr__: PyTorch's text, after torch.set_printoptions' settings; a subclass's begins with its name
    (torchvision's BoundingBoxes(...)), and tensor_contents replaces the values' text, as PyTorch's argument."""
    extra = []
    if t._device != "cpu":
        extra.append(f"device='{t._device}'")
    if t._device == "meta" or (t.numel() == 0 and t.ndim != 1) or \
            (t.numel() and not PRINT_OPTS.edgeitems):  # no items shown: PyTorch adds the size
        extra.append(f"size={tuple(t.shape)}")
    shown = (get_default_dtype().code,) if t.numel() == 0 else (get_default_dtype().code, 4, 5)
    if t._dtype not in shown:  # the default float dtype, int64 and bool go unsaid unless no value shows it
        extra.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        extra.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extra.append("requires_grad=True")
    prefix = f"{subclass}(" if subclass else "tensor("
    indent = len(prefix)
    if tensor_contents is not None:
        body = tensor_contents
    elif t._device == "meta":
        body = "..."
    elif t.numel() == 0:
        body = "[]"  # no data read
    else:
        body = values_str(t, indent)
    text = with_suffixes(prefix + body, extra, indent)
    return "Parameter containing:\n" + text if t._is_param else text


def empty_list(shape):
    """tolist() of a tensor with no element: [] at the first size-0 dimension, lists of it above."""
    if not shape or shape[0] == 0:
        return []
    return [empty_list(shape[1:]) for _ in range(shape[0])]
