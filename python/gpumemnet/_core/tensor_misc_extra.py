"""More of tensor_misc (its own file to keep each under 800 lines): as_strided (a differentiable view of the
storage), empty_strided, adjoint / mH, unravel_index, vander, the signal windows (hann, hamming, blackman,
bartlett), histogram, nonzero_static, and the legacy Tensor methods old scripts still call (new, resize_,
resize_as_, apply_, map_, dim_order, layout and the is_sparse-style flags, all False: gpumemnet's tensors are dense
and strided). histogram, nonzero_static, apply_ and map_ work on the host (values decide them). share_memory_
moves a CPU tensor into memory other processes share (shared_memory.py)."""
import math
import numbers

import numpy as np

from .. import _C
from . import dtype as _dtypes
from . import hooks
from . import shared_memory as _shared
from . import functions as F
from .autograd import Function, needs_grad as _needs_grad, refuse_inplace as _refuse_inplace
from .dtype import DISPLAY, SCALAR_TYPE_NAMES, as_dtype, factory_device, get_default_dtype
from .random import numpy_generator
from .size import Size
from .tensor_select import _host, _to_device
from .tensor_products import _powers
from .return_types import Histogram

__all__ = ["as_strided", "as_strided_", "empty_strided", "adjoint", "unravel_index", "vander", "hann_window",
           "hamming_window", "blackman_window", "bartlett_window", "kaiser_window", "histogram", "nonzero_static",
           "layout", "strided", "gradient", "empty_permuted", "frexp", "poisson", "binomial"]

_I64 = 4


def _need_tensor(op, t, arg="input"):
    if not isinstance(t, _C.TensorBase):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(t).__name__}")


def _ints(values, op, name):
    if isinstance(values, numbers.Integral):
        values = (values,)
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, numbers.Integral) for v in values):
        raise TypeError(f"{op}(): argument '{name}' must be a sequence of ints, not {type(values).__name__}")
    return tuple(int(v) for v in values)


# ---- as_strided ---------------------------------------------------------------------------------------------------
def _storage_positions(shape, strides, offset):
    """The storage index of every element of a (shape, strides, offset) geometry, in row-major order."""
    pos = np.full(shape, offset, np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        pos += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(shape) - d - 1))
    return pos.reshape(-1)


class _AsStrided(Function):
    """A view of x's storage in another geometry; backward adds each output gradient into the storage place it
    read (places read twice add up) and gives x the places its own elements hold."""

    @staticmethod
    def forward(ctx, x, size, stride, offset):
        ctx.geometry = (tuple(x.shape), tuple(x._strides), x._offset, size, stride, offset, x._dtype, x._device)
        return x._as_strided(size, stride, offset)

    @staticmethod
    def backward(ctx, g):
        shape, strides, x_offset, size, stride, offset, dt, dev = ctx.geometry
        out_pos = _storage_positions(size, stride, offset)
        in_pos = _storage_positions(shape, strides, x_offset)
        n = int(max(out_pos.max(initial=0), in_pos.max(initial=0))) + 1
        storage = _C.empty((n,), dt, dev)
        _C.fill_(storage, 0)
        if out_pos.size:
            _C.index_put_(storage, 0, _C.from_numpy(out_pos, _I64, dev), F.contiguous(g).reshape(-1), True)
        gx = storage.take_along_dim(_C.from_numpy(in_pos, _I64, dev), 0, _valid=True) if in_pos.size else \
            _C.empty((0,), dt, dev)
        return gx.reshape(shape), None, None, None


def _as_strided_args(self, size, stride, storage_offset, op):
    size, stride = _ints(size, op, "size"), _ints(stride, op, "stride")
    offset = self._offset if storage_offset is None else int(storage_offset)
    if len(size) != len(stride):
        raise RuntimeError(f"{op}(): mismatch in length of strides and shape: size {list(size)}, stride "
                           f"{list(stride)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"{op}(): Negative strides are not supported at the moment, got strides: {list(stride)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"{op}(): sizes must be non-negative, got {list(size)}")
    if offset < 0:
        raise RuntimeError(f"{op}(): Tensor: invalid storage offset {offset}")
    need = 0 if 0 in size else offset + 1 + sum((a - 1) * b for a, b in zip(size, stride))
    have = self._storage_nbytes // self.element_size()
    if need > have:
        raise RuntimeError(f"{op}(): setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
                           f"{offset}, and itemsize {self.element_size()} requiring a storage size of "
                           f"{need * self.element_size()} are out of bounds for storage of size "
                           f"{have * self.element_size()}")
    return size, stride, offset


def as_strided(input, size, stride, storage_offset=None):
    """A view of input's storage with the given sizes, strides (in elements) and offset (input's by default)."""
    _need_tensor("as_strided", input)
    return input.as_strided(size, stride, storage_offset)


def as_strided_(input, size, stride, storage_offset=None):
    _need_tensor("as_strided_", input)
    return input.as_strided_(size, stride, storage_offset)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialised tensor of the given sizes and strides, over a storage just large enough."""
    size, stride = _ints(size, "empty_strided", "size"), _ints(stride, "empty_strided", "stride")
    code = (get_default_dtype() if dtype is None else as_dtype(dtype)).code
    flat = _C.empty((1,), code, factory_device(device))
    return flat.new_empty_strided(size, stride, requires_grad=requires_grad)


# ---- small composites ------------------------------------------------------------------------------------------------
def adjoint(input):
    """The conjugate transpose of the last two dims: their transpose for real tensors (a view)."""
    _need_tensor("adjoint", input)
    return input.adjoint()


def unravel_index(indices, shape):
    """The coordinates (a tuple of int64 tensors of indices' shape) that flat indices have in `shape`; negative
    indices count from the end, and indices out of range wrap around, as in PyTorch."""
    if not isinstance(indices, _C.TensorBase):
        raise TypeError(f"unravel_index(): expected 'indices' to be a Tensor, but got {type(indices).__name__}")
    if indices._dtype not in (_I64, 6, 7, 8, 9):
        raise TypeError(f"unravel_index(): expected 'indices' to be an integer tensor, but got {indices.dtype}")
    shape = _ints(shape, "unravel_index", "shape")
    if any(s < 0 for s in shape):
        raise ValueError(f"unravel_index(): 'shape' cannot have negative values, but got {shape}")
    idx = indices.long()
    out = []  # each coordinate modulo its size, the first too (PyTorch's: indices out of range wrap around)
    for s in reversed(shape):
        out.append(idx.remainder(s) if s else idx * 0)
        idx = idx.div(s, rounding_mode="floor") if s else idx
    return tuple(reversed(out))


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of the 1-D x: columns x**(N-1) ... x**0 (reversed with increasing)."""
    _need_tensor("vander", x, "x")
    if x.ndim != 1:
        raise RuntimeError(f"x must be a one-dimensional tensor, got shape {tuple(x.shape)}")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise RuntimeError(f"N must be non-negative, got {n}")
    if n == 0:
        return _C.empty((x.shape[0], 0), x._dtype if x._dtype not in (5, 6, 7, 8, 9) else _I64, x._device)
    out = _powers(x if x._dtype not in (5, 6, 7, 8, 9) else x.long(), n)  # running products: finite gradient at 0
    return out if increasing else out.flip(1)


def _window(name, length, periodic, dtype, device, requires_grad, values):
    """A window of `length` points (one more, dropped, when periodic) of the values(k, m) (k: 0 .. m as a tensor
    of the window's dtype): the formulas of PyTorch's window functions, op by op in that dtype, as PyTorch computes
    them, so that a float32 window has PyTorch's bits (but where the two cos kernels round apart: 13 of a
    400-point Hann window's, 1 ulp; computed in float64 and rounded, 320 differed, and torchaudio's float64
    spectrograms, which upcast its float32 window, 1e-7 apart)."""
    if isinstance(length, bool) or not isinstance(length, numbers.Integral):
        raise TypeError(f"{name}(): argument 'window_length' must be int, not {type(length).__name__}")
    if length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={length}")
    dt = get_default_dtype() if dtype is None else as_dtype(dtype)
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dt}")
    dev = factory_device(device)
    if length <= 1:
        out = _C.from_numpy(np.ones(length), 1, dev).to(dt)
    else:
        n = length + 1 if periodic else length
        k = _C.from_numpy(np.arange(n, dtype=np.float64), 1, dev).to(dt)
        out = values(k, n - 1)[:length].contiguous()
    return out.requires_grad_() if requires_grad else out


def _cosine_sum(alpha, beta):
    """alpha - beta cos(2 pi k / m): PyTorch's hamming_window (hann: 0.5, 0.5), its ops in its order."""
    return lambda k, m: (k * (math.pi * 2.0 / m)).cos() * -beta + alpha


def _blackman(k, m):
    w = k * (math.pi / m)
    return (w * 4).cos() * 0.08 - (w * 2).cos() * 0.5 + 0.42


def _bartlett(k, m):
    """2k / m rising to the middle, 2 - 2k / m after it (PyTorch's split at (m >> 1) + 1)."""
    w = k * (2.0 / m)
    half = (m >> 1) + 1
    return w if half >= m + 1 else _C.cat([w[:half], w[half:] * -1 + 2], 0)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad, _cosine_sum(0.5, 0.5))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(alpha, beta))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad, _blackman)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad, _bartlett)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """An uninitialised tensor of `size` laid out in memory in the dim order physical_layout (outermost first)."""
    size = _ints(size, "empty_permuted", "size")
    order = _ints(physical_layout, "empty_permuted", "physical_layout")
    if sorted(order) != list(range(len(size))):
        raise RuntimeError(f"empty_permuted: physical_layout {list(order)} must be a permutation of the dims of "
                           f"size {list(size)} (Duplicate dim not allowed)")
    strides, step = [0] * len(size), 1
    for d in reversed(order):
        strides[d] = step
        step *= max(size[d], 1)
    return empty_strided(size, strides, dtype=dtype, device=device, requires_grad=requires_grad)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Estimated derivatives of the sampled function input along each dim (one tensor per dim): central
    differences inside, one-sided ones (first or second order) at the ends; spacing a number, one number per dim,
    or the sample coordinates (1-D tensors) per dim."""
    _need_tensor("gradient", input)
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    spacing = 1 if spacing is None else spacing  # PyTorch's default written out (spacing=None)
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, numbers.Integral) else list(dim)
    dims = [_dim_index(d, input.ndim) for d in dims]
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacing)} and a dim argument of length {len(dims)}.")
        spacings = list(spacing)
    else:
        spacings = [spacing] * len(dims)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    f = input if input.is_floating_point() else input.to(get_default_dtype())
    return tuple(_derivative(f, d, h, edge_order) for d, h in zip(dims, spacings))


def _dim_index(d, ndim):
    if not -ndim <= d < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
    return d % ndim


def _derivative(f, d, h, edge_order):
    n = f.shape[d]

    def part(start, length):
        return f.narrow(d, start, length)

    if isinstance(h, _C.TensorBase):  # sample coordinates: numpy's second-order formulas for uneven steps
        if h.ndim != 1 or h.shape[0] != n:
            raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and 1-D of size "
                               f"{n}, got a spacing tensor of shape {tuple(h.shape)}")
        view = tuple(-1 if i == d else 1 for i in range(f.ndim))
        dx = h.to(f.dtype).diff()
        a, b = dx.narrow(0, 0, n - 2).reshape(view), dx.narrow(0, 1, n - 2).reshape(view)
        inner = part(0, n - 2) * (-b / (a * (a + b))) + part(1, n - 2) * ((b - a) / (a * b)) + \
            part(2, n - 2) * (a / (b * (a + b)))
        first_dx, last_dx = dx.narrow(0, 0, 1).reshape(view), dx.narrow(0, n - 2, 1).reshape(view)
        if edge_order == 1:
            first = (part(1, 1) - part(0, 1)) / first_dx
            last = (part(n - 1, 1) - part(n - 2, 1)) / last_dx
        else:
            a, b = first_dx, dx.narrow(0, 1, 1).reshape(view)
            first = part(0, 1) * (-(2 * a + b) / (a * (a + b))) + part(1, 1) * ((a + b) / (a * b)) + \
                part(2, 1) * (-a / (b * (a + b)))
            a, b = dx.narrow(0, n - 3, 1).reshape(view), last_dx
            last = part(n - 3, 1) * (b / (a * (a + b))) + part(n - 2, 1) * (-(a + b) / (a * b)) + \
                part(n - 1, 1) * ((2 * b + a) / (b * (a + b)))
    else:
        h = float(h)
        inner = (part(2, n - 2) - part(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first, last = (part(1, 1) - part(0, 1)) / h, (part(n - 1, 1) - part(n - 2, 1)) / h
        else:
            first = (part(0, 1) * -3 + part(1, 1) * 4 - part(2, 1)) / (2 * h)
            last = (part(n - 1, 1) * 3 - part(n - 2, 1) * 4 + part(n - 3, 1)) / (2 * h)
    pieces = [first, inner, last]
    return F.Cat.apply(d, *pieces) if _needs_grad(*pieces) else _C.cat(pieces, d)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  pin_memory=False, requires_grad=False):
    """I0(beta * sqrt(1 - (2k / m - 1)**2)) / I0(beta) (the modified Bessel function I0, NumPy's)."""
    def values(k, m):  # computed in float64 on the host, rounded once to k's dtype, on k's device
        n = np.arange(k.shape[0], dtype=np.float64)
        v = np.i0(beta * np.sqrt(np.clip(1 - (2 * n / m - 1) ** 2, 0, None))) / np.i0(beta)
        return _C.from_numpy(v, 1, k._device).to(k.dtype)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, values)


# ---- counted on the host ---------------------------------------------------------------------------------------------
def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002  (PyTorch's names)
    """(hist, bin_edges) of input's values: bins equal-width bins over range (the values' min..max by default),
    or the given edges (a 1-D tensor); counted on the host."""
    _need_tensor("histogram", input)
    if input._dtype not in (0, 1, 2, 3):  # PyTorch's type: no kernel for the dtype
        raise NotImplementedError(f"torch.histogram: input tensor and bins tensors should have the same dtype, and be "
                           f"floating point, got {input.dtype}")
    a = _host(input, "histogram").reshape(-1).astype(np.float64)
    w = None if weight is None else _host(weight, "histogram").reshape(-1).astype(np.float64)
    if isinstance(bins, _C.TensorBase):
        edges = _host(bins, "histogram").astype(np.float64)
        if edges.ndim != 1 or np.any(np.diff(edges) < 0):
            raise RuntimeError("torch.histogram(): bins must be a 1-D tensor of increasing edges")
    else:
        if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        lo, hi = (float(a.min()), float(a.max())) if range is None and a.size else \
            (0.0, 1.0) if range is None else (float(range[0]), float(range[1]))  # (no values: PyTorch's [0, 1])
        if not (np.isfinite(lo) and np.isfinite(hi)):  # PyTorch's refusal (a NaN gave wrong counts)
            raise RuntimeError(f"torch.histogramdd: dimension 0's range [{lo}, {hi}] is not finite")
        if lo > hi:
            raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min {lo} max {hi}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5  # PyTorch's widening of an empty range
        edges = np.linspace(lo, hi, int(bins) + 1)
    hist, edges = np.histogram(a, bins=edges, weights=w, density=density)
    return Histogram(_to_device(hist.astype(np.float64), input, 1).to(input.dtype),
                     _to_device(edges, input, 1).to(input.dtype))


def nonzero_static(input, *, size, fill_value=-1):
    """nonzero() padded with fill_value rows (or cut) to exactly `size` rows: a shape known before the values."""
    _need_tensor("nonzero_static", input)
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be a non-negative int, got {size}")
    found = np.argwhere(_host(input, "nonzero_static") != 0).astype(np.int64)
    out = np.full((int(size), max(input.ndim, 1) if input.ndim else 0), fill_value, np.int64)
    out[:min(len(found), size)] = found[:size]
    return _to_device(out, input, _I64)


class layout:
    """A tensor's memory layout: gpumemnet's are all strided (gm.strided), PyTorch's default one."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"{DISPLAY[0]}.{self.name}"


strided = layout("strided")


def _resize_sizes(args, op):
    sizes = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    sizes = _ints(tuple(sizes), op, "size")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"{op}(): sizes must be non-negative, got {list(sizes)}")
    return sizes


def _contiguous_strides(sizes):
    strides, step = [], 1
    for s in reversed(sizes):
        strides.append(step)
        step *= max(s, 1)
    return tuple(reversed(strides))


def _host_map(self, op, fn, *others):
    """self's values replaced by fn applied to each (with the matching values of others), on the host."""
    if not callable(fn):
        raise TypeError(f"{op}(): '{type(fn).__name__}' object is not callable")
    if self._device != "cpu":
        raise RuntimeError(f"{op} is only implemented on CPU tensors, got one on {self._device}")
    _refuse_inplace(self, op)
    a = _host(self, op)
    args = [np.broadcast_to(_host(o, op), a.shape) for o in others]
    out = np.array([fn(*(v.item() for v in vals)) for vals in zip(a.reshape(-1), *(b.reshape(-1) for b in args))])
    _C.copy_(self, _to_device(out.reshape(a.shape).astype(a.dtype), self))
    return self


def frexp(input):
    """(mantissa, exponent): input = mantissa * 2 ** exponent, mantissa in [0.5, 1) (NumPy's frexp)."""
    if not isinstance(input, _C.TensorBase) or not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    m, e = np.frexp(input.detach().cpu().float().numpy() if input.dtype.name == "bfloat16" else
                    input.detach().cpu().numpy())
    return (_C.from_numpy(np.asarray(m, order="C"), input._dtype, input._device),
            _C.from_numpy(np.asarray(e.astype(np.int32), order="C"), 9, input._device))


def poisson(input, generator=None):
    """Poisson samples with rates input (float), drawn from gpumemnet's generator (or generator)."""
    if not isinstance(input, _C.TensorBase) or not input.dtype.is_floating_point:
        raise TypeError("poisson: input must be a floating point tensor of rates")
    rates = input.detach().cpu().double().numpy()
    if (rates < 0).any() or np.isnan(rates).any():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    draws = numpy_generator(generator).poisson(rates)
    return _C.from_numpy(np.asarray(draws.astype(np.float64), order="C"), input._dtype, input._device)


def binomial(count, prob, generator=None):
    """Binomial samples of count trials (float, whole numbers >= 0) with success probabilities prob, elementwise,
    in count's dtype, drawn from gpumemnet's generator (or generator), as poisson's."""
    for name, t in (("count", count), ("prob", prob)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"binomial(): argument '{name}' must be Tensor, not {type(t).__name__}")
        if not t.dtype.is_floating_point:
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: "
                             f"{SCALAR_TYPE_NAMES[t._dtype]}")
    n, p = np.broadcast_arrays(count.detach().cpu().double().numpy(), prob.detach().cpu().double().numpy())
    # PyTorch checks no range: a negative count draws 0, a probability past [0, 1] acts as the bound
    draws = numpy_generator(generator).binomial(np.clip(n, 0, None).astype(np.int64), np.clip(p, 0.0, 1.0))
    return _C.from_numpy(np.asarray(draws.astype(np.float64), order="C"), count._dtype, count._device)


class ExtraMethods:
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    def _is_view(self):
        """Whether this is a view of another tensor (that still lives: Tensor._base, csrc/tensor_views.c)."""
        return self._base is not None

    @staticmethod
    def _make_subclass(cls, data, require_grad=False, dispatch_sizes_strides_policy=None, dispatch_device=False,
                       dispatch_layout=False, _extra_dispatch_keys=None, storage_size=None):
        """PyTorch's Tensor._make_subclass(cls, data, require_grad): a detached alias of data (no copy) as an
        instance of cls (geoopt's ManifoldTensor, a Tensor subclass's __new__). For a subclass of nn.Parameter,
        which is no Tensor class here (nn/parameter.py), a parameter: the Tensor flagged as one."""
        if not isinstance(data, _C.TensorBase):
            raise TypeError(f"_make_subclass: data must be a Tensor, got {type(data).__name__}")
        if getattr(cls, "_makes_parameter", False):
            return as_parameter(data, bool(require_grad))
        if not isinstance(cls, type) or not issubclass(cls, _C.TensorBase):
            raise TypeError(f"_make_subclass: cls must be a subclass of Tensor, got {cls!r}")
        t = data.detach().as_subclass(cls)
        t.requires_grad_(bool(require_grad))
        return t

    def stft(self, *args, **kwargs):
        """torch.stft(self, ...) (gpumemnet.fft)."""
        return hooks.get("fft").stft(self, *args, **kwargs)

    def share_memory_(self):
        """Move a CPU tensor's values into shared memory, in place (the same tensor object: requires_grad, the
        parameter flag and .grad stay): processes forked afterwards, and those it is sent to through
        multiprocessing (a spawned child's arguments, a Queue), see and write the same memory (hogwild training).
        A tensor already shared stays as it is; on CUDA it is a no-op, as in PyTorch. Unlike PyTorch, only this
        tensor moves: other views of its old memory keep the old memory. The shared memory is not gpumemnet's
        allocator's (like from_numpy's memory, the memory reports do not count it)."""
        return _shared.share(self)

    def is_shared(self):
        """True for a tensor in memory share_memory_() made (or received from another process), and on CUDA
        (as PyTorch says)."""
        return self._device.startswith("cuda") or _shared.shared_block(self) is not None

    def frexp(self):
        return frexp(self)

    def as_strided(self, size, stride, storage_offset=None):
        size, stride, offset = _as_strided_args(self, size, stride, storage_offset, "as_strided")
        if _needs_grad(self):
            return _AsStrided.apply(self, size, stride, offset)
        return self._as_strided(size, stride, offset)

    def as_strided_(self, size, stride, storage_offset=None):
        """self becomes the as_strided view of its storage (same storage, no copy)."""
        size, stride, offset = _as_strided_args(self, size, stride, storage_offset, "as_strided_")
        _refuse_inplace(self, "as_strided_")
        self._set_data(self.detach()._as_strided(size, stride, offset))
        return self

    def set_(self, source=None, storage_offset=0, size=None, stride=None):
        """In place: self takes source's memory (a tensor's or a storage's, shared, as PyTorch's) and geometry, or
        the view of it that storage_offset / size / stride describe (as_strided's checks); with no source, empty."""
        _refuse_inplace(self, "set_")
        if source is None:
            source = _C.empty((0,), self._dtype, self._device)
        elif not isinstance(source, _C.TensorBase):
            if not callable(getattr(source, "untyped", None)):  # an UntypedStorage or TypedStorage
                raise TypeError(f"set_(): argument 'source' must be a Tensor or a storage, not {type(source).__name__}")
            raw = source.untyped()._data  # the storage's bytes, read as self's dtype
            source = raw if raw._dtype == self._dtype else raw._view_dtype(self._dtype)
            size = (source.numel(),) if size is None else size
        if size is not None:
            size = _ints(size, "set_", "size")
            stride = _contiguous_strides(size) if stride is None else stride
            source = source._as_strided(*_as_strided_args(source, size, stride, storage_offset, "set_"))
        self._set_data(source)
        return self

    def adjoint(self):
        if self.ndim < 2:
            raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                               f"{self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    @property
    def mH(self):  # noqa: N802  (PyTorch's name)
        return self.adjoint()

    @property
    def H(self):  # noqa: N802  (PyTorch's name: the conjugate transpose of a matrix; real tensors here)
        if self.ndim not in (0, 2):
            raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
        return self if self.ndim == 0 else self.transpose(0, 1)

    def nonzero_static(self, *, size, fill_value=-1):
        return nonzero_static(self, size=size, fill_value=fill_value)

    def histogram(self, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
        return histogram(self, bins, range=range, weight=weight, density=density)

    # ---- legacy methods and flags ---------------------------------------------------------------------------
    @property
    def layout(self):
        return strided

    @property
    def _cdata(self):
        """PyTorch's address of the tensor's C object: an int, the same for the same tensor, another for a view
        (Pyro's pyro.module compares a module's parameter with the param store's by it)."""
        return id(self)

    @property
    def is_sparse(self):
        return False

    @property
    def is_sparse_csr(self):
        return False

    @property
    def is_quantized(self):
        return False

    @property
    def is_nested(self):
        return False

    # devices and kinds gpumemnet has no tensors of: libraries test them (torchmetrics' `or x.is_mps`)
    is_mps = is_xla = is_mkldnn = is_xpu = is_ipu = is_vulkan = is_mtia = is_maia = is_nested

    def is_conj(self):
        return False

    def conj(self):
        """A real tensor is its own conjugate (PyTorch returns self; complex tensors have their own)."""
        return self

    resolve_conj = resolve_neg = conj

    def cfloat(self): return self.to(_dtypes.complex64)

    def cdouble(self): return self.to(_dtypes.complex128)

    def chalf(self): return self.to(_dtypes.complex32)

    def __rdiv__(self, other): return self.__rtruediv__(other)  # (Python 2's name, which PyTorch keeps)

    def conj_physical(self):
        return self.clone()

    def is_neg(self):
        return False

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this CPU tensor's memory (NumPy's export of it)."""
        if self._device != "cpu":
            raise BufferError(f"__dlpack__: gpumemnet exports CPU tensors only, this one is on {self.device}")
        return _C.TensorBase.numpy(self.detach()).__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)  # DLPack's kDLCPU, device 0

    def __contains__(self, element):
        """`element in t`: whether any entry equals element (a number or a tensor), as PyTorch's."""
        if not isinstance(element, (_C.TensorBase, numbers.Number)):
            raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                               f"{type(element)}.")
        return bool((self == element).any())

    def __reversed__(self):
        """reversed(t): t flipped along dim 0 (a 0-d tensor is itself), as PyTorch's (d2l's bidirectional RNN
        runs reversed(inputs))."""
        return self if self.ndim == 0 else self.flip(0)

    def dim_order(self, *, ambiguity_check=False):
        """The dims from outermost to innermost in memory (by stride, largest first)."""
        if not isinstance(ambiguity_check, (bool, list)):
            raise TypeError("The ambiguity_check argument must be a bool or a list of memory formats.")
        return tuple(sorted(range(self.ndim), key=lambda d: -self._strides[d]))

    def new(self, *args, device=None):
        """PyTorch's legacy constructor: new(*sizes) or new(torch.Size) uninitialised, new(data) from a list,
        new() empty; in self's dtype and (by default) on self's device."""
        if len(args) == 1 and isinstance(args[0], _C.TensorBase):
            if args[0]._dtype != self._dtype:
                raise TypeError(f"new(): expected a tensor of {self.dtype}, got {args[0].dtype}")
            return args[0]
        if len(args) == 1 and (isinstance(args[0], (list, tuple, np.ndarray)) or hasattr(args[0], "__array__")) and \
                not isinstance(args[0], Size):  # data: lists, an ndarray (fastai's `last_input.new(lambd)`)
            return self.new_tensor(args[0], device=device)
        if len(args) == 1 and isinstance(args[0], Size):
            args = tuple(args[0])
        if not all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            raise TypeError(f"new(): invalid data type '{type(args[0]).__name__}'")
        return self.new_empty(args if args else (0,), device=device)

    def resize_(self, *sizes, memory_format=None):
        """self takes the given sizes (contiguous strides) over its storage from its offset, a larger storage
        (holding the old values first) when that is too small. Refused on tensors that require grad."""
        sizes = _resize_sizes(sizes, "resize_")
        if self.requires_grad:
            raise RuntimeError("cannot resize variables that require grad")
        strides = _contiguous_strides(sizes)
        n = math.prod(sizes)
        capacity = self._storage_nbytes // self.element_size() - self._offset
        if n <= capacity:
            self._set_data(self._as_strided(sizes, strides, self._offset))
            return self
        grown = _C.empty((n,), self._dtype, self._device)
        if capacity > 0:
            _C.copy_(grown._as_strided((capacity,), (1,), 0), self._as_strided((capacity,), (1,), self._offset))
        self._set_data(grown._as_strided(sizes, strides, 0))
        return self

    def resize_as_(self, the_template, *, memory_format=None):
        _need_tensor("resize_as_", the_template, "the_template")
        return self.resize_(tuple(the_template.shape), memory_format=memory_format)

    def apply_(self, callable):  # noqa: A002  (PyTorch's name)
        """Each value replaced by callable(value), in Python on the host (CPU tensors only, as PyTorch)."""
        return _host_map(self, "apply_", callable)

    def map2_(self, x, y, callable):  # noqa: A002
        """Each value replaced by callable(value, x's value, y's value) (x and y broadcast to self)."""
        _need_tensor("map2_", x, "x")
        _need_tensor("map2_", y, "y")
        for t in (x, y):
            try:
                ok = np.broadcast_shapes(tuple(t.shape), tuple(self.shape)) == tuple(self.shape)
            except ValueError:
                ok = False
            if not ok:
                raise RuntimeError(f"map2_: tensor of shape {tuple(t.shape)} does not broadcast to self's "
                                   f"{tuple(self.shape)}")
        return _host_map(self, "map2_", callable, x, y)

    def const_data_ptr(self):
        return self.data_ptr()

    def map_(self, tensor, callable):  # noqa: A002
        """Each value replaced by callable(value, tensor's value there) (tensor broadcast to self)."""
        _need_tensor("map_", tensor, "tensor")
        try:
            np.broadcast_shapes(tuple(tensor.shape), tuple(self.shape))
        except ValueError:
            raise RuntimeError(f"map_: the expanded size of the tensor {tuple(tensor.shape)} must match the existing "
                               f"size {tuple(self.shape)}") from None
        if np.broadcast_shapes(tuple(tensor.shape), tuple(self.shape)) != tuple(self.shape):
            raise RuntimeError(f"map_: tensor of shape {tuple(tensor.shape)} does not broadcast to self's "
                               f"{tuple(self.shape)}")
        return _host_map(self, "map_", callable, tensor)


def as_parameter(data, requires_grad):
    """A detached alias of data (no copy) flagged as a parameter, its storage tagged "parameter": what
    nn.Parameter(data, requires_grad) makes, and Tensor(data, requires_grad=...) (legacy_types) too."""
    t = data._as_strided(data.shape, data._strides, data._offset)
    t.requires_grad = requires_grad  # C refuses non-float dtypes with a clear RuntimeError
    t._is_param = True
    t._category = "parameter"
    return t
