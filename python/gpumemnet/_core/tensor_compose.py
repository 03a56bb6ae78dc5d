"""Tensor methods that training code reaches for around the model, composed of ops that already are: cumulative
sums and products, triangles and diagonals, logsumexp, outer and dot products, tile, nan_to_num, and the layout
names (stride, storage_offset, data_ptr, itemsize, ndimension, mT). Each is differentiable, runs on every device
and is priced on meta because every step is an existing op.

cumsum and cumprod scan in ceil(log2(n)) passes over the whole tensor (Hillis and Steele's scan: pass k adds the
value 2^k places back), which keeps them on existing elementwise kernels on every device; a dedicated kernel would
make one pass. On the CPU, float64 (and float32, scanned in float64) is scanned in order by NumPy, as PyTorch's.
diagonal is a view, as in PyTorch, so a write into it reaches the tensor."""
import math
import numbers

import numpy as np

from .. import _C
from . import functions as F
from .autocast import _state as _amp_state
from .autograd import Function, needs_grad as _needs_grad
from .dtype import DTYPES, finfo
from .indexing import write_recorded
from .state import warn_once
from .tensor_methods import _dim

_I64, _BOOL = 4, 5
_FLOAT_CODES = (0, 1, 2, 3)


def _diagonal_mask(t, wrap):
    """A bool tensor of t's shape, True where t.fill_diagonal_(v, wrap) writes."""
    mask = _C.empty(tuple(t.shape), _BOOL, t._device)
    _C.fill_(mask, False)
    return mask.fill_diagonal_(True, wrap)


# ---- scans --------------------------------------------------------------------------------------------------
_WIDER = {0: 1, 2: 0, 3: 0}  # float32 -> float64, float16 / bfloat16 -> float32


def _wider(x):
    """The dtype code a scan of x accumulates in: PyTorch's CPU scans accumulate float32 in float64 (the half types
    in float32), so each result is rounded once (diffusers' alphas_cumprod); its CUDA ones do not. A meta tensor
    follows the device it stands for in an estimate (the CPU otherwise). None: x's own."""
    dev = x._device
    if dev == "meta":
        dev = _amp_state.meta_stands_for or "cpu"
    return _WIDER.get(x._dtype) if dev == "cpu" else None


def _scan(x, d, op):
    """Inclusive scan of x along d with a C binary op (ADD or MUL), no graph: a new tensor."""
    wide = _wider(x)
    if wide is not None:
        return F.cast(_scan_as_is(F.cast(x, wide), d, op), x._dtype)
    return _scan_as_is(x, d, op)


def _scan_as_is(x, d, op):
    if x._device == "cpu" and x._dtype == 1 and x.ndim:
        # float64 on the host (float32's scans too, widened): one pass in order, as PyTorch's CPU scan; the passes
        # below associate otherwise, and overflowed or cancelled where it does not ([1e-200, 1e200, 1e200])
        a = _C.TensorBase.numpy(F.contiguous(x))
        return _C.from_numpy(np.ascontiguousarray((np.cumsum if op == F.ADD else np.cumprod)(a, axis=d)), 1, "cpu")
    n = x.shape[d]
    y = F.cast(x, x._dtype)  # a copy: the passes write into their own tensors, never into x
    shift = 1
    while shift < n:
        z = F.cast(y, y._dtype)
        hi = z._slice(d, shift, n, 1)
        _C.binary(op, hi, y._slice(d, 0, n - shift, 1), hi)
        y, shift = z, shift * 2
    return y


def _reversed(t, d):
    n = t.shape[d]
    return _C.index(t, d, _C.from_numpy(np.arange(n - 1, -1, -1, dtype=np.int64), _I64, t._device))


class _Cumsum(Function):
    """The gradient of a cumulative sum is the cumulative sum of the gradient taken from the other end."""

    @staticmethod
    def forward(ctx, x, d):
        ctx.d = d
        return _scan(x, d, F.ADD)

    @staticmethod
    def backward(ctx, g):
        return _reversed(_scan(_reversed(g, ctx.d), ctx.d, F.ADD), ctx.d), None


def _scan_input(t, dtype):
    """The scanned tensor: cast to dtype, or integers and bools widened to int64 (PyTorch's result type)."""
    if dtype is not None:
        return t.to(dtype)
    return t if t._dtype in _FLOAT_CODES or t._dtype == _I64 else F.cast(t, _I64)


def _cumprod_graph(x, d):
    """cumprod recorded step by step (products of slices, then cat): autograd gets zeros right by itself."""
    wide = _wider(x)
    if wide is not None:
        return F.ToDtype.apply(_cumprod_graph_as_is(F.ToDtype.apply(x, wide), d), x._dtype)
    return _cumprod_graph_as_is(x, d)


def _cumprod_graph_as_is(x, d):
    n, shift, y = x.shape[d], 1, x
    while shift < n:
        head = y.narrow(d, 0, shift)
        tail = y.narrow(d, shift, n - shift) * y.narrow(d, 0, n - shift)
        y = F.Cat.apply(d, head, tail)
        shift *= 2
    return y if y is not x else x.clone()


# ---- diagonals ----------------------------------------------------------------------------------------------
def _diagonal_geometry(shape, strides, base, offset, d1, d2):
    """(shape, strides, offset) of the diagonal view: the two dims replaced by one at the end."""
    h, w = shape[d1], shape[d2]
    n = max(0, min(h, w - offset) if offset >= 0 else min(h + offset, w))
    keep = [i for i in range(len(shape)) if i not in (d1, d2)]
    start = base + (offset * strides[d2] if offset >= 0 else -offset * strides[d1]) if n else base
    return (tuple(shape[i] for i in keep) + (n,), tuple(strides[i] for i in keep) + (strides[d1] + strides[d2],),
            start)


class _Diagonal(Function):
    @staticmethod
    def forward(ctx, x, offset, d1, d2):
        ctx.args = (x.shape, x._dtype, x._device, offset, d1, d2)
        ctx.view_base = F.root_ref(x)  # a write into the diagonal is recorded on x's base (indexing.write_graph_view)
        return x._as_strided(*_diagonal_geometry(x.shape, x._strides, x._offset, offset, d1, d2))

    @staticmethod
    def backward(ctx, g):
        shape, dt, dev, offset, d1, d2 = ctx.args
        out = _C.empty(shape, dt, dev)
        _C.fill_(out, 0)
        _C.copy_(out._as_strided(*_diagonal_geometry(out.shape, out._strides, 0, offset, d1, d2)), g)
        return out, None, None, None


def _finite_shift(m):
    """The maximum a log-sum-exp takes out before exponentiating: 0 where it is infinite (all -inf, or an inf),
    so that x - m stays defined and the result is -inf or inf as it should."""
    return _C.where(_C.binary(F.EQ, _C.unary(F.ABS, m), math.inf), 0.0, m)


def _diag_embed(v, offset):
    """(..., n) -> (..., m, m) with v on diagonal `offset` of the last two dims, zeros elsewhere (diag of a
    vector; tensor_products' diag_embed)."""
    m = (v.shape[-1] if v.ndim else 1) + abs(offset)
    shape = tuple(v.shape[:-1]) + (m, m)
    out = _C.empty(shape, v._dtype, v._device)
    _C.fill_(out, 0)
    nd = len(shape)
    _C.copy_(out._as_strided(*_diagonal_geometry(shape, out._strides, 0, offset, nd - 2, nd - 1)), v)
    return out


class _DiagEmbed(Function):
    @staticmethod
    def forward(ctx, v, offset):
        ctx.offset = offset
        return _diag_embed(v, offset)

    @staticmethod
    def backward(ctx, g):
        nd = g.ndim
        view = g._as_strided(*_diagonal_geometry(g.shape, g._strides, g._offset, ctx.offset, nd - 2, nd - 1))
        return F.contiguous(view), None


def _triangle_mask(t, diagonal, lower, op):
    """Bool mask of the entries a triangle zeroes (True outside it), over the last two dims."""
    if t.ndim < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions")
    if not isinstance(diagonal, numbers.Integral) or isinstance(diagonal, bool):
        raise TypeError(f"{op}: diagonal must be an int, got {type(diagonal).__name__}")
    h, w = t.shape[-2:]
    keep = np.tri(h, w, int(diagonal), dtype=bool) if lower else ~np.tri(h, w, int(diagonal) - 1, dtype=bool)
    return _C.from_numpy(np.asarray(~keep, order="C"), _BOOL, t._device)


class ComposeMethods:
    """The composed Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    # ---- scans ----------------------------------------------------------------------------------------------
    def cumsum(self, dim, *, dtype=None):
        """Running sum along dim (integers and bools sum in int64, as in PyTorch)."""
        x = _scan_input(self, dtype)
        if x.ndim == 0:
            return x.clone()
        d = _dim(dim, x.ndim, "cumsum")
        return _Cumsum.apply(x, d) if _needs_grad(x) else _scan(x, d, F.ADD)

    def cumprod(self, dim, *, dtype=None):
        """Running product along dim (integers and bools in int64); its gradient is right where entries are 0."""
        x = _scan_input(self, dtype)
        if x.ndim == 0:
            return x.clone()
        d = _dim(dim, x.ndim, "cumprod")
        return _cumprod_graph(x, d) if _needs_grad(x) else _scan(x, d, F.MUL)

    def cumsum_(self, dim, *, dtype=None):
        return self.copy_(self.cumsum(dim, dtype=dtype))

    def logsumexp(self, dim, keepdim=False):
        """log(sum(exp(x))) over dim (an int or a tuple), computed stably: the maximum is taken out first."""
        x = self if self._dtype in _FLOAT_CODES else self.float()
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        dims = tuple(_dim(d, x.ndim, "logsumexp") for d in dims) if x.ndim else ()
        if x.numel() == 0 or not dims:
            out = x.exp().sum(dims, keepdim=True).log() if dims else x.clone()
        else:
            m = _finite_shift(x.detach().amax(dims, keepdim=True))
            out = (x - m).exp().sum(dims, keepdim=True).log() + m
        if keepdim:
            return out
        return out.reshape(tuple(s for i, s in enumerate(x.shape) if i not in dims))

    # ---- triangles and diagonals ------------------------------------------------------------------------
    def tril(self, diagonal=0):
        """The lower triangle of the last two dims (on and below diagonal `diagonal`), the rest zero."""
        return self.masked_fill(_triangle_mask(self, diagonal, True, "tril"), 0)

    def triu(self, diagonal=0):
        """The upper triangle of the last two dims (on and above diagonal `diagonal`), the rest zero."""
        return self.masked_fill(_triangle_mask(self, diagonal, False, "triu"), 0)

    def tril_(self, diagonal=0):
        return self.masked_fill_(_triangle_mask(self, diagonal, True, "tril_"), 0)

    def triu_(self, diagonal=0):
        return self.masked_fill_(_triangle_mask(self, diagonal, False, "triu_"), 0)

    def diagonal(self, offset=0, dim1=0, dim2=1):
        """A view of the diagonal `offset` of the dims dim1 and dim2, which become one last dim (PyTorch's)."""
        if self.ndim < 2:
            raise RuntimeError(f"diagonal: expected a tensor with at least 2 dimensions, got shape "
                               f"{tuple(self.shape)}")
        d1, d2 = _dim(dim1, self.ndim, "diagonal"), _dim(dim2, self.ndim, "diagonal")
        if d1 == d2:
            raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
        if not isinstance(offset, numbers.Integral) or isinstance(offset, bool):
            raise TypeError(f"diagonal: offset must be an int, got {type(offset).__name__}")
        if _needs_grad(self):
            return _Diagonal.apply(self, int(offset), d1, d2)
        return self._as_strided(*_diagonal_geometry(self.shape, self._strides, self._offset, int(offset), d1, d2))

    def diag(self, diagonal=0):
        """A vector's square matrix with it on diagonal `diagonal`; a matrix's diagonal, as a new vector."""
        if not isinstance(diagonal, numbers.Integral) or isinstance(diagonal, bool):
            raise TypeError(f"diag: diagonal must be an int, got {type(diagonal).__name__}")
        if self.ndim == 1:
            return _DiagEmbed.apply(self, int(diagonal)) if _needs_grad(self) else _diag_embed(self, int(diagonal))
        if self.ndim == 2:
            return self.diagonal(int(diagonal)).clone()
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {self.ndim}D")

    def fill_diagonal_(self, fill_value, wrap=False):
        """Fill the main diagonal of a matrix (all dims of equal size beyond two) in place."""
        if self.ndim < 2 or (self.ndim > 2 and len(set(self.shape)) != 1):
            raise RuntimeError(f"fill_diagonal_: dimensions must larger than 1 and all of equal length for more "
                               f"than 2 dimensions, got shape {tuple(self.shape)}")
        if write_recorded(self, "fill_diagonal_", (), lambda x: x.masked_fill(_diagonal_mask(self, wrap), fill_value)):
            return self  # in a graph (lightly's DINO loss): the diagonal's old values get no gradient, as PyTorch's
        if wrap and self.ndim == 2 and self.shape[0] > self.shape[1] + 1:
            step = self.shape[1] + 1  # the diagonal restarts every w + 1 rows (numpy's wrap)
            for start in range(0, self.shape[0], step):
                self.narrow(0, start, min(step, self.shape[0] - start)).fill_diagonal_(fill_value)
            return self
        view = self._as_strided((min(self.shape),), (sum(self._strides),), self._offset)
        view.fill_(fill_value)
        return self

    # ---- products and friends ---------------------------------------------------------------------------
    def outer(self, vec2):
        """The outer product of two vectors: out[i, j] = self[i] * vec2[j]."""
        if not isinstance(vec2, _C.TensorBase):
            raise TypeError(f"outer: vec2 must be a Tensor, got {type(vec2).__name__}")
        if self.ndim != 1 or vec2.ndim != 1:
            raise RuntimeError(f"outer: expected 1-D vectors, got shapes {tuple(self.shape)} and "
                               f"{tuple(vec2.shape)}")
        return self.reshape(-1, 1) * vec2.reshape(1, -1)

    ger = outer

    def dot(self, other):
        """The inner product of two vectors of the same size and dtype."""
        if not isinstance(other, _C.TensorBase):
            raise TypeError(f"dot: argument 'tensor' must be a Tensor, got {type(other).__name__}")
        if self.ndim != 1 or other.ndim != 1:
            raise RuntimeError(f"1D tensors expected, but got {self.ndim}D and {other.ndim}D tensors")
        if self.shape[0] != other.shape[0]:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{self.shape[0]}] and src "
                               f"[{other.shape[0]}] to have the same number of elements, but got {self.shape[0]} "
                               f"and {other.shape[0]} elements respectively")
        if self._dtype != other._dtype:
            raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {self.dtype} and "
                               f"{other.dtype}")
        if self._dtype == 5:
            raise NotImplementedError("\"dot\" not implemented for 'Bool'")
        out = (self * other).sum()
        # an integer dot keeps its dtype, wrapping as PyTorch's (the int64 sum agrees with it modulo 2^bits)
        return out if out._dtype == self._dtype else out.to(self.dtype)

    def tile(self, *reps, dims=None):
        """repeat, with missing leading repeats taken as 1 (PyTorch's and NumPy's tile); dims= is PyTorch's name."""
        dims = reps if dims is None else (dims,)
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else tuple(dims)
        if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in dims):
            raise TypeError(f"tile(): argument 'dims' must be tuple of ints, got {dims!r}")
        if len(dims) < self.ndim:
            dims = (1,) * (self.ndim - len(dims)) + dims
        return self.repeat(dims)

    def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
        """NaN, +inf and -inf replaced (by default with 0 and the dtype's largest and lowest finite values)."""
        for name, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
            if v is not None and (not isinstance(v, numbers.Real) or isinstance(v, bool)):
                raise TypeError(f"nan_to_num(): argument '{name}' must be float, not {type(v).__name__}")
        if self._dtype not in _FLOAT_CODES:
            return self.clone()
        info = finfo(self.dtype)
        posinf = info.max if posinf is None else posinf
        neginf = info.min if neginf is None else neginf
        # (as 0-d float64 tensors: a replacement past the dtype's range is cast to inf, as PyTorch's, not refused)
        nan, posinf, neginf = (self.new_full((), v, dtype=DTYPES[1]) for v in (nan, posinf, neginf))
        x = self.masked_fill(self != self, nan)
        x = x.masked_fill(x == math.inf, posinf)
        return x.masked_fill(x == -math.inf, neginf)

    def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
        return self.copy_(self.nan_to_num(nan, posinf, neginf))

    # ---- layout names -----------------------------------------------------------------------------------
    def stride(self, dim=None):
        """Strides in elements (a tuple), or one dim's."""
        if dim is None:
            return tuple(self._strides)
        return self._strides[_dim(dim, self.ndim, "stride")]

    def storage_offset(self):
        return self._offset

    def data_ptr(self):
        """The address of the first element (device memory for a CUDA tensor; 0 on meta, as in PyTorch)."""
        return 0 if self._device == "meta" else self._data_ptr

    @property
    def itemsize(self):
        return self.element_size()

    def ndimension(self):
        return self.ndim

    @property
    def T(self):  # noqa: N802  (PyTorch's name)
        """The dims reversed (a view); deprecated by PyTorch, with its once-per-process warnings, except on 2-D."""
        if self.ndim == 0:
            warn_once("Tensor.T is deprecated on 0-D tensors. This function is the identity in these cases.")
        elif self.ndim != 2:
            warn_once("The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated and "
                      "it will throw an error in a future release. Consider `x.mT` to transpose batches of matrices "
                      "or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.")
        return self.permute(tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self):  # noqa: N802  (PyTorch's name)
        """The last two dims swapped (a view)."""
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got "
                               f"{self.ndim}-D tensor.")
        return self.transpose(-2, -1)

