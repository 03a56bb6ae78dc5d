"""More of PyTorch's Tensor methods, composed of ops that already are: in-place forms of shape and rounding ops,
order statistics (median, kthvalue, quantile, cummax/cummin), logaddexp / logcumsumexp, hypot, xlogy, logit,
nan-aware sums, repeat_interleave, unfold (a view), index_put_, and the metadata names scripts use (nelement,
type(), is_cpu). Each is differentiable where PyTorch's is, runs on every device and is priced on meta.

The order statistics rank on the host (argsort, as sort and topk do) and gather on the device, so their values
are differentiable; cummax/cummin find their indices on the host too."""
import math
import numbers
import weakref

import numpy as np

from .. import _C
from .arg_forms import as_int
from . import autocast as _amp
from . import functions as F
from .autograd import Function, check_inplace, is_grad_enabled as _grad_enabled, is_graph_view
from .autograd import needs_grad as _needs_grad
from .autograd import refuse_inplace as _refuse_inplace
from .autograd_hooks import register_tensor_hook
from . import indexing_multi
from .indexing import check_put_dtypes, make_plan, put_plan, record_in_place, write_graph_view
from .dtype import DTYPES, get_default_dtype
from .tensor_compose import _finite_shift
from .tensor_methods import _dim, _where
from .tensor_select import _host
from .return_types import MinMax, ValuesIndices as _RESULT

_I64, _BOOL = 4, 5
_FLOAT_CODES = (0, 1, 2, 3)
# PyTorch's legacy type names, which scripts compare x.type() with
_TYPE_NAMES = {0: "FloatTensor", 1: "DoubleTensor", 2: "HalfTensor", 3: "BFloat16Tensor", 4: "LongTensor",
               5: "BoolTensor", 6: "ByteTensor", 7: "CharTensor", 8: "ShortTensor", 9: "IntTensor"}


def _write_back(self, name, compute):
    """self's values replaced by compute(self)'s, the out-of-place op (the in-place form: sign_, round_...); in a
    graph recorded as PyTorch records it (indexing.record_in_place)."""
    if not record_in_place(self, name, compute):
        _C.copy_(self, compute(self.detach()))
    return self


def _reshape_in_place(self, name, view_of):
    """self takes the geometry of view_of(self) (squeeze_, unsqueeze_, t_, transpose_): same storage, no copy. A
    tensor inside a graph (not a leaf) is rebased on the view's node, as PyTorch's: its gradient flows through
    the view's backward to its old history."""
    if self.grad_fn is not None and self.requires_grad and _grad_enabled():
        view = view_of(self)
        node, nr = view.grad_fn, view._output_nr
        self._set_data(view.detach())
        self.grad_fn, self._output_nr = node, nr
        return self
    _refuse_inplace(self, name)
    view = view_of(self.detach())
    self._set_data(view.detach() if view.requires_grad else view)
    return self


def _order_stat(x, dim, k, keepdim, op):
    """(values, indices) of the k-th smallest entry (0-based) along dim: argsort on the host, gather here."""
    d = _dim(dim, x.ndim, op) if x.ndim else 0
    idx = x.argsort(d) if x.ndim else _C.from_numpy(np.zeros((), np.int64), _I64, x._device)
    pick = idx.narrow(d, k, 1) if x.ndim else idx
    values = x.take_along_dim(pick, d, _valid=True) if x.ndim else x.clone()
    if not keepdim and x.ndim:
        values, pick = values.squeeze(d), pick.squeeze(d)
    return values, pick.contiguous()



def _xlogy_values(x, y):
    """x * log(y), 0 where x is 0 (even where y is 0 or inf), NaN where y is NaN."""
    out = _where(x == 0, 0.0, x * (y.log() if isinstance(y, _C.TensorBase) else math.log(y) if y > 0 else
                                   (-math.inf if y == 0 else math.nan)))
    return _where(y != y, math.nan, out) if isinstance(y, _C.TensorBase) else out


class _XLogY(Function):
    """xlogy with PyTorch's gradients: d/dx = log(y), but 0 where x and y are both 0 (the composite's where()
    gave 0 there for every y, and 0 * -inf = NaN at y = 0); d/dy = x / y."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y if isinstance(y, _C.TensorBase) else None)
        ctx.number = None if isinstance(y, _C.TensorBase) else y
        return _xlogy_values(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx._unpacked
        yv = y if y is not None else ctx.number
        logy = yv.log() if y is not None else (math.log(yv) if yv > 0 else -math.inf if yv == 0 else math.nan)
        both_zero = (x == 0) & (y == 0) if y is not None else (x == 0) & (yv == 0)
        gx = F.sum_to(_where(both_zero, 0.0, g * logy), x.shape, x._dtype) if ctx.needs_input_grad[0] else None
        gy = F.sum_to(g * x / y, y.shape, y._dtype) if y is not None and ctx.needs_input_grad[1] else None
        return gx, gy

class _WindowsView(Function):
    """unfold: windows of `size` every `step` along d as a view (one new last dim); backward adds each window's
    gradient back into its entries (windows may overlap)."""

    @staticmethod
    def forward(ctx, x, d, size, step):
        ctx.args = (tuple(x.shape), x._dtype, x._device, d, size, step)
        return x._as_strided(*_windows_geometry(x.shape, x._strides, x._offset, d, size, step))

    @staticmethod
    def backward(ctx, g):
        shape, dt, dev, d, size, step = ctx.args
        n = (shape[d] - size) // step + 1
        out = _C.empty(shape, dt, dev)
        _C.fill_(out, 0)
        pos = (np.arange(n)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
        g = F.contiguous(g.movedim(-1, d + 1)).reshape(shape[:d] + (n * size,) + shape[d + 1:])
        _C.index_put_(out, d, _C.from_numpy(np.asarray(pos, np.int64, order="C"), _I64, dev), g, True)
        return out, None, None, None


def _windows_geometry(shape, strides, offset, d, size, step):
    n = (shape[d] - size) // step + 1
    return (tuple(shape[:d]) + (n,) + tuple(shape[d + 1:]) + (size,),
            tuple(strides[:d]) + (strides[d] * step,) + tuple(strides[d + 1:]) + (strides[d],), offset)


def _logaddexp(a, b):
    """log(exp(a) + exp(b)) without overflow: the larger one taken out (both -inf gives -inf)."""
    m = _finite_shift(a.detach().maximum(b.detach() if isinstance(b, _C.TensorBase) else b))
    return ((a - m).exp() + (b - m).exp()).log() + m


def _quantile_args(x, q, interpolation, op):
    """quantile's and nanquantile's checks; q's values as a float64 array."""
    if x._dtype not in (0, 1):
        raise RuntimeError(f"quantile() input tensor must be either float or double dtype, got {x.dtype}")
    qs = np.asarray(_host(q, op) if isinstance(q, _C.TensorBase) else q, np.float64)
    if qs.ndim > 1 or np.any((qs < 0) | (qs > 1)):
        raise RuntimeError("quantile() q values must be in the range [0, 1] (a number or a 1-D tensor)")
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ValueError(f"quantile() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                         f"Got {interpolation}")
    return qs


def _hypot(a, b):
    """sqrt(a^2 + b^2) without overflow or underflow in the squares (C's hypot): where a square would overflow or
    lose digits below the normal range, the larger magnitude times sqrt(1 + (smaller / larger)^2) (one rounding
    more, so only there); inf where either is inf, even beside a NaN."""
    a, b = a.abs(), b.abs()
    hi, lo = a.maximum(b), a.minimum(b)
    direct = (a * a + b * b).sqrt()
    scaled = hi * (1 + (lo / _where(hi == 0, 1.0, hi)) ** 2).sqrt()
    small = 1e-140 if direct._dtype == 1 else 1e-14  # float64; float32 and the half types (computed in float32)
    r = _where(direct.isfinite() & (hi > small), direct, scaled)
    return _where(a.isinf() | b.isinf(), math.inf, r)


class _Hypot(Function):
    """hypot with PyTorch's gradients: g * a / hypot(a, b) and g * b / hypot(a, b)."""

    @staticmethod
    def forward(ctx, a, b):
        r = _hypot(a, b)
        ctx.save_for_backward(a, b, r)
        return r

    @staticmethod
    def backward(ctx, g):
        a, b, r = ctx._unpacked
        need = ctx.needs_input_grad
        return (((g * a) / r).sum_to_size(a.shape) if need[0] else None,
                ((g * b) / r).sum_to_size(b.shape) if need[1] else None)


class MoreMethods:
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """What a NumPy function of a tensor gives back (np.exp(t), np.transpose(t, (1, 2, 0)) in the DCGAN
        tutorial): a tensor of its result, as PyTorch's (which makes a bool result uint8)."""
        if array.dtype == np.bool_:
            array = array.astype(np.uint8)
        array = np.asarray(array, order="C")  # (ascontiguousarray would make a 0-d result 1-d)
        shared = _C.from_numpy_shared(array)  # (its memory, as torch.from_numpy; a dtype it cannot share: copied)
        return shared if shared is not None else _C.from_numpy(array, None, "cpu")

    @property
    def real(self):
        """A real tensor's real part is itself, as in PyTorch (code that takes .real of FFT results and of plain
        tensors alike); complex tensors are _core/complex.py's."""
        return self

    @property
    def imag(self):
        raise TypeError("imag is not implemented for tensors with non-complex dtypes.")  # PyTorch's type

    def retain_grad(self):
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        self._retains_grad = True
        self._register_retain()

    def _register_retain(self):
        """retain_grad's hook on the current grad_fn; it stores nothing once the tensor was written in place (its
        grad_fn changed: autograd._RETAIN_MOVED puts a hook on the new one)."""
        me, node = weakref.ref(self), self.grad_fn  # the hook lives on our own grad_fn: a strong reference to us
        # would be a cycle

        def keep(g):
            t = me()
            if t is not None and t.grad_fn is node:
                t.grad = g.detach().clone() if t.grad is None else t.grad + g
        keep.retains_grad = True  # kept last: .grad is the gradient after the tensor's hooks (PyTorch 2's rule)
        register_tensor_hook(self, keep)


    # ---- metadata ---------------------------------------------------------------------------------------------
    def nelement(self):
        return self.numel()

    @property
    def is_cpu(self):
        return self._device == "cpu"

    def type(self, dtype=None, non_blocking=False):
        """Without dtype, PyTorch's legacy type name ('torch.FloatTensor', 'torch.cuda.LongTensor'); with one (a
        dtype or such a name), a copy in that dtype (self when it has it already)."""
        if dtype is None:
            prefix = "torch.cuda." if self._device.startswith("cuda") else "torch."
            return prefix + _TYPE_NAMES.get(self._dtype, "Tensor")
        if isinstance(dtype, type) and hasattr(dtype, "_torch_name"):  # torch.FloatTensor (legacy_types.py)
            dtype = dtype._torch_name
        if isinstance(dtype, str):
            name = dtype.rsplit(".", 1)[-1]
            codes = {v: k for k, v in _TYPE_NAMES.items()}
            if name not in codes:
                raise ValueError(f"invalid type: '{dtype}'")
            out = self.to(dtype=["float32", "float64", "float16", "bfloat16", "int64", "bool", "uint8", "int8",
                                 "int16", "int32"][codes[name]])
            on_cuda = self._device.startswith("cuda")
            if (".cuda." in dtype) != on_cuda:  # the name says the device too
                out = out.cpu() if on_cuda else out.cuda()
            return out
        return self.to(dtype=dtype, non_blocking=non_blocking)

    # ---- in-place forms -------------------------------------------------------------------------------------
    def squeeze_(self, dim=None):
        return _reshape_in_place(self, "squeeze_", lambda t: t.squeeze(dim) if dim is not None else t.squeeze())

    def unsqueeze_(self, dim):
        return _reshape_in_place(self, "unsqueeze_", lambda t: t.unsqueeze(dim))

    def t_(self):
        return _reshape_in_place(self, "t_", lambda t: t.t())

    def transpose_(self, dim0, dim1):
        return _reshape_in_place(self, "transpose_", lambda t: t.transpose(dim0, dim1))

    def sign_(self): return _write_back(self, "sign_", lambda t: t.sign())
    def trunc_(self): return _write_back(self, "trunc_", lambda t: t.trunc())
    def round_(self, decimals=0): return _write_back(self, "round_", lambda t: t.round(decimals=decimals))
    def square_(self): return _write_back(self, "square_", lambda t: t.square())
    def frac_(self): return _write_back(self, "frac_", lambda t: t.frac())
    def logical_not_(self): return _write_back(self, "logical_not_", lambda t: t.logical_not())
    def clamp_min_(self, min): return self.clamp_(min=min)
    def clamp_max_(self, max): return self.clamp_(max=max)
    def clip_(self, min=None, max=None): return self.clamp_(min, max)
    def true_divide_(self, other): return self.div_(other)

    def absolute(self): return self.abs()
    def absolute_(self): return self.abs_()
    def sgn(self): return self.sign()

    # ---- pointwise composites ---------------------------------------------------------------------------------
    def frac(self):
        """self - trunc(self): the fractional part, with self's sign."""
        return self - self.trunc()

    def logaddexp(self, other):
        return _logaddexp(self, other)

    def hypot(self, other):
        if not isinstance(other, _C.TensorBase):
            raise TypeError(f"hypot(): argument 'other' must be Tensor, not {type(other).__name__}")
        return _Hypot.apply(self, other) if _needs_grad(self, other) else _hypot(self, other)

    def xlogy(self, other):
        """self * log(other), 0 where self is 0 (even where other is 0), NaN where other is NaN (PyTorch's)."""
        if not isinstance(other, (_C.TensorBase, numbers.Real)):
            raise TypeError(f"xlogy(): other must be a Tensor or a number, got {type(other).__name__}")
        y = other if isinstance(other, _C.TensorBase) else float(other)
        x = self
        if isinstance(y, _C.TensorBase) and y._dtype != x._dtype:
            # computed in the result's dtype, as PyTorch's (float64 x with float32 y: the log of y widened, not
            # float32's log widened)
            code = F.result_code((x, y), ranked=True)
            dt = DTYPES[code] if code in (0, 1, 2, 3) else get_default_dtype()
            x, y = (t if t.dtype == dt else t.to(dt) for t in (x, y))
        if _needs_grad(x) or _needs_grad(y):
            return _XLogY.apply(x, y)
        return _xlogy_values(x, y)

    def logit(self, eps=None):
        x = self if eps is None else self.clamp(eps, 1.0 - eps)
        return (x / (1.0 - x)).log()

    def float_power(self, exponent):
        """self ** exponent in float64, as PyTorch's float_power."""
        e = exponent.double() if isinstance(exponent, _C.TensorBase) else exponent
        return self.double() ** e

    # ---- reductions -------------------------------------------------------------------------------------------
    def aminmax(self, *, dim=None, keepdim=False):
        return MinMax(self.amin(dim, keepdim) if dim is not None else self.amin(),
                      self.amax(dim, keepdim) if dim is not None else self.amax())

    def nansum(self, dim=None, keepdim=False, *, dtype=None):
        x = _where(self != self, 0, self)
        return x.sum(dim, keepdim, dtype=dtype) if dim is not None else x.sum(dtype=dtype)

    def nanmean(self, dim=None, keepdim=False, *, dtype=None):
        if self._dtype not in _FLOAT_CODES:  # PyTorch's error type
            raise NotImplementedError(f"nanmean(): expected input to have floating point dtype but got {self.dtype}")
        count = (self == self).sum(dim, keepdim) if dim is not None else (self == self).sum()
        return self.nansum(dim, keepdim, dtype=dtype) / count

    def median(self, dim=None, keepdim=False):
        """The lower of the two middle values (PyTorch's median); with dim, (values, indices). NaN propagates."""
        if dim is None:
            flat = self.reshape(-1)
            if flat.numel() == 0:
                if self._dtype not in _FLOAT_CODES:
                    return flat.sum()
                out = _C.empty((), self._dtype, self._device)
                _C.fill_(out, math.nan)
                return out
            v, _ = _order_stat(flat.detach(), 0, (flat.numel() - 1) // 2, False, "median")
            if self._dtype in _FLOAT_CODES:
                v = _where(flat.detach().isnan().any(), math.nan, v)  # NaN propagates
            return _MedianAll.apply(flat, v) if _needs_grad(flat) else v
        d = _dim(dim, self.ndim, "median")
        n = self.shape[d] if self.ndim else 1
        v, i = _order_stat(self, d, (n - 1) // 2, keepdim, "median")
        if self._dtype in _FLOAT_CODES and self.ndim:  # a row holding NaN: NaN, at its first NaN (PyTorch's)
            nan = self.detach().isnan()
            has = nan.any(d, keepdim)
            v, i = _where(has, math.nan, v), _where(has, nan.long().argmax(d, keepdim), i)
        return _RESULT["median"](v, i)

    def kthvalue(self, k, dim=-1, keepdim=False):
        """(values, indices) of the k-th smallest entry along dim (k from 1)."""
        n = self.shape[_dim(dim, self.ndim, "kthvalue")] if self.ndim else 1
        k = as_int(k)
        if not isinstance(k, numbers.Integral) or not 1 <= k <= n:
            raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
        return _RESULT["kthvalue"](*_order_stat(self, dim, int(k) - 1, keepdim, "kthvalue"))

    def quantile(self, q, dim=None, keepdim=False, *, interpolation="linear"):
        """The q-quantiles (q a number or a 1-D tensor in [0, 1]) along dim (of all entries by default), by
        interpolating between the sorted values as PyTorch's 'linear', 'lower', 'higher', 'midpoint', 'nearest'."""
        qs = _quantile_args(self, q, interpolation, "quantile")
        if self.ndim == 0 and dim is not None:  # dim 0 / -1 of a 0-d tensor: its one value, a 0-d result
            _dim(dim, 0, "quantile")
            dim = None
        x = self.reshape(-1) if dim is None else self
        d = 0 if dim is None else _dim(dim, self.ndim, "quantile")
        n = x.shape[d]
        s = x.sort(d)[0]
        nan_row = s.narrow(d, n - 1, 1).isnan() if n else None  # NaN sorts last: a row with one gives NaN (PyTorch)
        # q requiring grad: 'linear' interpolates with a weight taken from q itself, so q gets its gradient
        q_graph = q.reshape(-1) if isinstance(q, _C.TensorBase) and q.requires_grad else None
        outs = []
        for i, qv in enumerate(qs.reshape(-1)):
            pos = qv * (n - 1)
            lo, hi = int(math.floor(pos)), int(math.ceil(pos))
            if interpolation == "lower":
                hi = lo
            elif interpolation == "higher":
                lo = hi
            elif interpolation == "nearest":
                lo = hi = int(np.round(pos))  # half to even, as PyTorch
            a, b = s.narrow(d, lo, 1), s.narrow(d, hi, 1)
            w = 0.5 if interpolation == "midpoint" else pos - lo
            if q_graph is not None and interpolation == "linear":
                w = (q_graph[i] * (n - 1) - lo).to(s.dtype)
            v = a if lo == hi and q_graph is None else a + (b - a) * w
            if nan_row is not None:
                v = v.masked_fill(nan_row, math.nan)
            if dim is None:
                v = v.reshape(tuple(1 for _ in self.shape)) if keepdim else v.reshape(())
            elif not keepdim:
                v = v.squeeze(d)
            outs.append(v)
        return outs[0] if qs.ndim == 0 else _stack(outs)

    def cummax(self, dim):
        return _RESULT["cummax"](*self._cum_extreme(dim, np.maximum, "cummax"))

    def cummin(self, dim):
        return _RESULT["cummin"](*self._cum_extreme(dim, np.minimum, "cummin"))

    def _cum_extreme(self, dim, ufunc, op):
        """The running max / min's indices on the host (the latest index on ties, as PyTorch), values gathered."""
        d = _dim(dim, self.ndim, op) if self.ndim else 0
        if self._device == "meta":
            return self.clone(), _C.empty(tuple(self.shape), _I64, "meta")
        a = _host(self, op)
        a = np.moveaxis(a.reshape(a.shape or (1,)), d, -1)
        idx = np.zeros(a.shape, np.int64)
        best = a[..., 0].copy() if a.shape[-1] else a[..., :0]
        for i in range(1, a.shape[-1]):
            v = a[..., i]
            take = (ufunc(v, best) == v) | np.isnan(v)
            take &= ~np.isnan(best) | np.isnan(v)
            idx[..., i] = np.where(take, i, idx[..., i - 1])
            best = np.where(take, v, best)
        idx = np.asarray(np.moveaxis(idx, -1, d).reshape(tuple(self.shape)), order="C")
        it = _C.from_numpy(idx, _I64, self._device)
        return (self.take_along_dim(it, d, _valid=True) if self.ndim else self.clone()), it

    def logcumsumexp(self, dim):
        """log(cumsum(exp(x))) along dim without overflow: a log-step scan of logaddexp."""
        d = _dim(dim, self.ndim, "logcumsumexp") if self.ndim else 0
        if self.ndim == 0:
            return self.clone()
        n, shift, y = self.shape[d], 1, self
        while shift < n:
            y = F.Cat.apply(d, y.narrow(d, 0, shift), _logaddexp(y.narrow(d, shift, n - shift),
                                                                  y.narrow(d, 0, n - shift))) \
                if _needs_grad(y) else _C.cat([y.narrow(d, 0, shift), _logaddexp(y.narrow(d, shift, n - shift),
                                                                                  y.narrow(d, 0, n - shift))], d)
            shift *= 2
        return y if y is not self else self.clone()

    def trace(self):
        if self.ndim != 2:
            raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.ndim}")
        if _amp._state.enabled and _amp._state.device == "cpu":  # on PyTorch's CPU autocast float32 list
            return _amp.fp32(self)[0].diagonal().sum()
        return self.diagonal().sum()

    def dist(self, other, p=2):
        return (self - other).norm(p)

    def sum_to_size(self, *size):
        """Sum broadcast dims away down to size (which self must broadcast from)."""
        size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
        lead = self.ndim - len(size)
        if lead < 0 or any(s != 1 and s != self.shape[lead + i] for i, s in enumerate(size)):
            raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                               f"{{{', '.join(map(str, self.shape))}}}.")
        dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size) if s == 1 and self.shape[lead + i] != 1)
        return (self.sum(dims, keepdim=True) if dims else self).reshape(size)

    # ---- rearranging -------------------------------------------------------------------------------------------
    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        """Each entry repeated `repeats` times (a number, or one count per entry) along dim (the flattened
        tensor without dim)."""
        x = self.reshape(-1) if dim is None else self
        d = 0 if dim is None else _dim(dim, self.ndim, "repeat_interleave")
        n = x.shape[d]
        if isinstance(repeats, _C.TensorBase):
            reps = _host(repeats, "repeat_interleave").reshape(-1).astype(np.int64)
            if reps.size == 1:
                reps = np.full(n, int(reps[0]))
        else:
            reps = np.full(n, int(repeats))
        if reps.shape != (n,):
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{reps.size} and input.size({d}) = {n}")
        if np.any(reps < 0):
            raise RuntimeError("repeats can not be negative")
        index = np.repeat(np.arange(n, dtype=np.int64), reps)
        return x.index_select(d, _C.from_numpy(index, _I64, self._device))

    def unflatten(self, dim, sizes):
        """dim split into sizes (one of them may be -1)."""
        d = _dim(dim, self.ndim, "unflatten")
        sizes = tuple(int(s) for s in sizes)
        if not sizes:
            raise RuntimeError("unflatten: sizes must be non-empty")
        known = math.prod(s for s in sizes if s != -1)
        if sizes.count(-1) > 1 or (-1 in sizes and (known == 0 or self.shape[d] % known)) or \
                (-1 not in sizes and known != self.shape[d]):
            raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {d} "
                               f"({self.shape[d]}) in the input tensor")
        return self.reshape(tuple(self.shape[:d]) + sizes + tuple(self.shape[d + 1:]))

    def take(self, index):
        """self flattened, read at index (any shape; negative indices count from the end)."""
        if not isinstance(index, _C.TensorBase) or index._dtype != _I64:
            raise RuntimeError("take(): Expected a long tensor for index")
        flat = self.reshape(-1)
        try:
            return flat.take_along_dim(index.reshape(-1), 0).reshape(tuple(index.shape))
        except RuntimeError as e:  # out of range: PyTorch's type and words
            if "out of bounds" not in str(e):
                raise
            bad = next(int(i) for i in _host(index, "take").reshape(-1) if not -flat.numel() <= i < flat.numel())
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {flat.numel()} "
                             f"elements.") from None

    def fliplr(self):
        if self.ndim < 2:
            raise RuntimeError("Input must be >= 2-d.")
        return self.flip(1)

    def flipud(self):
        if self.ndim < 1:
            raise RuntimeError("Input must be >= 1-d.")
        return self.flip(0)

    def rot90(self, k=1, dims=(0, 1)):
        """Rotated by 90 degrees k times in the plane of dims, from the first dim toward the second."""
        if len(dims) != 2:
            raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
        if self.ndim < 2:
            raise RuntimeError(f"expected total dims >= 2, but got total dims = {self.ndim}")
        d0, d1 = _dim(dims[0], self.ndim, "rot90"), _dim(dims[1], self.ndim, "rot90")
        if d0 == d1:
            raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
        k = int(k) % 4
        if k == 1:
            return self.flip(d1).transpose(d0, d1)
        if k == 2:
            return self.flip(d0, d1)
        if k == 3:
            return self.flip(d0).transpose(d0, d1)
        return self.clone()

    def unfold(self, dimension, size, step):
        """A view of the windows of `size` entries every `step` along dimension, as one new last dim."""
        d = _dim(dimension, max(self.ndim, 1), "unfold")
        if self.ndim == 0:  # a 0-d tensor is seen as one entry: windows of it, one dim (PyTorch's)
            return self.reshape(1).unfold(0, size, step).reshape(-1)
        n = self.shape[d]
        if not 0 <= size <= n:
            raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
        if step <= 0:
            raise RuntimeError(f"step is {step} but must be > 0")
        if _needs_grad(self):
            return _WindowsView.apply(self, d, int(size), int(step))
        return self._as_strided(*_windows_geometry(self.shape, self._strides, self._offset, d, int(size), int(step)))

    # ---- writes by index ----------------------------------------------------------------------------------------
    def index_put_(self, indices, values, accumulate=False):
        """self[indices] = values (+= with accumulate: repeated indices add up); indices a tuple of index
        tensors, one per leading dim."""
        check_put_dtypes(self, tuple(indices), values)
        if is_graph_view(self) and write_graph_view(  # a view of a tensor in a graph, written as v[...] = is
                self, lambda v: v.clone().index_put_(tuple(indices), values, accumulate)):
            return self
        if check_inplace(self, "index_put_") or _needs_grad(values):
            indexing_multi.setitem_recorded(self, tuple(indices), values, accumulate=bool(accumulate))
            return self
        plan = make_plan(self, tuple(indices))
        if plan is None:
            indexing_multi.setitem(self, tuple(indices), values, accumulate=bool(accumulate))
        else:
            put_plan(self, plan, values, accumulate=bool(accumulate))
        return self

    def index_put(self, indices, values, accumulate=False):
        """A copy of self with index_put_ applied."""
        return self.clone().index_put_(indices, values, accumulate)


def _stack(tensors):
    return F.Cat.apply(0, *[t.unsqueeze(0) for t in tensors]) if _needs_grad(*tensors) else \
        _C.cat([t.unsqueeze(0) for t in tensors], 0)


class _MedianAll(Function):
    """median() of all entries: the gradient shared evenly among the entries equal to it (NaN ones when it is NaN),
    as PyTorch's. (A sum of (x - x.detach()) over the ties, added to the value, was NaN where an entry is inf.)"""

    @staticmethod
    def forward(ctx, flat, v):
        ties = _C.binary(F.EQ, flat, v)
        if flat._dtype in _FLOAT_CODES:  # NaN == NaN is false: a NaN median's ties are the NaN entries
            ties = _C.binary(F.MAXIMUM, F.cast(ties, 0), F.cast(_C.binary(F.NE, flat, flat), 0))
        ctx.save_for_backward(F.cast(ties, flat._dtype))
        return _C.binary(F.ADD, v, 0)

    @staticmethod
    def backward(ctx, g):
        ties, = ctx._unpacked
        return _C.binary(F.MUL, ties, _C.binary(F.DIV, g, _C.reduce(F.SUM, ties, None, False))), None
