"""Value ops of tensor_misc (its own file to keep each under 800 lines): masked_scatter, scatter_reduce,
index_reduce, select_scatter / slice_scatter / diagonal_scatter, mode, nanmedian, nanquantile, renorm and isin,
composed of existing ops so that gradients flow where PyTorch's do.

Host-side parts (values decide them, as in unique / bincount, so meta tensors cannot run them): scatter_reduce's
and index_reduce's prod / amax / amin reductions, mode, isin of large inputs, and masked_scatter's check that
source is long enough (skipped on meta)."""
import math
import numbers

import numpy as np

from .. import _C
from . import functions as F
from .autograd import Function, needs_grad as _needs_grad
from .tensor_methods import _dim, _where
from .tensor_more import _quantile_args, _stack
from .indexing import index_put_into, record_in_place, write_recorded
from .tensor_select import _copy, _covered, _host, _padded, _positions, _scatter_args, _to_device, zero_dim_as_one
from .return_types import ValuesIndices as _RESULT

__all__ = ["masked_scatter", "scatter_reduce", "mode", "nanmedian", "nanquantile", "renorm", "isin", "index_reduce",
           "select_scatter", "slice_scatter", "diagonal_scatter", "as_strided_scatter"]

_I64, _BOOL = 4, 5
_FLOATS = (0, 1, 2, 3)
_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _need_tensor(op, t, arg="input"):
    if not isinstance(t, _C.TensorBase):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(t).__name__}")


def _full(shape, value, code, device):
    out = _C.empty(tuple(shape), code, device)
    _C.fill_(out, value)
    return out


def _flat(t):
    return t.reshape(-1) if t.ndim else t.reshape(1)


# ---- scatter_reduce ---------------------------------------------------------------------------------------------
def _identity(reduce, dtype_code):
    """The start value of an entry that only src feeds (include_self=False) for the host reductions."""
    if reduce == "prod":
        return 1
    if dtype_code in _FLOATS:
        return -math.inf if reduce == "amax" else math.inf
    if dtype_code == 5:  # bool: False is the least value (int64's least, written into a bool array, read True)
        return reduce != "amax"
    info = np.iinfo({4: np.int64, 6: np.uint8, 7: np.int8, 8: np.int16, 9: np.int32}.get(dtype_code, np.int64))
    return info.min if reduce == "amax" else info.max


_UFUNCS = {"prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _reduce_values(x, pos, vals, reduce, include_self):
    """(out, count): x (contiguous copy, flat) with vals reduced into the entries pos names; count: how many src
    values each entry received (int64)."""
    out = _flat(_copy(x))
    count = _C.empty(tuple(out.shape), _I64, out._device)
    _C.fill_(count, 0)
    if pos.numel():
        _C.index_put_(count, 0, pos, _full(tuple(pos.shape), 1, _I64, pos._device), True)
    touched = count > 0
    if reduce in ("sum", "mean"):
        if not include_self:
            out = _where(touched, 0, out).to(x.dtype)
        if pos.numel():
            index_put_into(out, 0, pos, vals, True, wide_halves=True)
        if reduce == "mean":
            n = count + (1 if include_self else 0)
            div = out.div(n.clamp(min=1), rounding_mode="floor") if x._dtype not in _FLOATS else out / n.clamp(min=1)
            out = _where(touched, div.to(x.dtype), out)
        return out, count
    a, p, v = _host(out, "scatter_reduce"), _host(pos, "scatter_reduce"), _host(vals, "scatter_reduce")
    a = a.copy()
    if not include_self:
        a[np.unique(p)] = _identity(reduce, x._dtype)
    _UFUNCS[reduce].at(a, p, v.astype(a.dtype))
    return _to_device(a, out), count


class _ScatterReduce(Function):
    """scatter_reduce with PyTorch's gradients: sum and mean pass g back (mean divided by each entry's count);
    amax / amin share g evenly among the values equal to the result; prod gives g * (product of the others)."""

    @staticmethod
    def forward(ctx, x, src, d, index, reduce, include_self):
        pos, vals = _positions(tuple(x.shape), index, d), _covered(src, index)
        out, count = _reduce_values(x, pos, vals, reduce, include_self)
        ctx.args = (reduce, include_self, tuple(x.shape), tuple(src.shape), tuple(index.shape))
        ctx.save_for_backward(_flat(_copy(x)), vals, pos, count, out)
        return out.reshape(tuple(x.shape))

    @staticmethod
    def backward(ctx, g):
        reduce, include_self, shape, src_shape, index_shape = ctx.args
        x, vals, pos, count, out = ctx._unpacked
        g = _flat(F.contiguous(g))
        touched = count > 0
        keep = 1.0 if include_self else 0.0
        if reduce == "sum":
            gx, gs = _where(touched, g * keep, g), g[pos]
        elif reduce == "mean":
            n = (count + (1 if include_self else 0)).clamp(min=1).to(g.dtype)
            gx, gs = _where(touched, g * keep / n, g), (g / n)[pos]
        elif reduce in ("amax", "amin"):
            # PyTorch's count of the ties takes self's value in even when include_self=False (then self gets no
            # share, and each tied value of src gets g / (its ties + 1) where self equals the result)
            self_ties = _where(touched, x == out, True)
            src_ties = vals == out[pos]
            ties = self_ties.to(g.dtype)
            if pos.numel():
                _C.index_put_(ties, 0, pos, src_ties.to(g.dtype), True)
            share = g / ties
            gx, gs = share * (self_ties & (include_self | ~touched)).to(g.dtype), share[pos] * src_ties.to(g.dtype)
        else:
            gx, gs = _prod_grads(g, x, vals, pos, touched, out, include_self)
        gx = gx.reshape(shape) if ctx.needs_input_grad[0] else None
        gs = gs.reshape(index_shape) if ctx.needs_input_grad[1] else None
        if gs is not None and index_shape != src_shape:
            gs = _padded(gs, src_shape)
        return gx, gs, None, None, None, None


def _prod_grads(g, x, vals, pos, touched, out, include_self):
    """d out / d value = the product of the other values of its entry: out / value where value != 0, else the
    product of the entry's nonzero values when value is its only zero (0 otherwise). Counted on the host."""
    p, v, a = _host(pos, "scatter_reduce"), _host(vals, "scatter_reduce").astype(np.float64), \
        _host(x, "scatter_reduce").astype(np.float64)
    nonzero = np.where(a != 0, a, 1.0) if include_self else np.ones_like(a)
    zeros = (a == 0).astype(np.int64) if include_self else np.zeros(a.shape, np.int64)
    np.multiply.at(nonzero, p, np.where(v != 0, v, 1.0))
    np.add.at(zeros, p, (v == 0).astype(np.int64))

    def others(values, at):
        o = _host(out, "scatter_reduce").astype(np.float64)[at]
        alone = np.where(zeros[at] == 1, nonzero[at], 0.0)
        return np.where(values != 0, o / np.where(values != 0, values, 1.0), alone)

    gx = g * _to_device(others(a, np.arange(a.size)), g)
    gx = _where(touched, gx if include_self else 0.0, g)
    gs = g[pos] * _to_device(others(v, p), g)
    return gx, gs


def _scatter_reduce(self, dim, index, src, reduce, include_self, op):
    if reduce not in _REDUCES:
        raise RuntimeError(f"{op}(): reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    _need_tensor(op, src, "src")
    index, src = zero_dim_as_one(self, index, src)
    d, index = _scatter_args(self, dim, index, src, op)
    if _needs_grad(self, src):
        return _ScatterReduce.apply(self, src, d, index, reduce, bool(include_self))
    return _ScatterReduce.forward(_Ctx(), self, src, d, index, reduce, bool(include_self))


class _Ctx:
    """The ctx of a forward run outside the graph: nothing to keep."""

    def save_for_backward(self, *t):
        pass


# ---- masked_scatter ---------------------------------------------------------------------------------------------
def _broadcast_shape(a, b):
    """The shape a and b broadcast to (the C op's check, by a comparison of their meta forms)."""
    return tuple(_C.binary(F.EQ, _C.empty(tuple(a.shape), 5, "meta"), _C.empty(tuple(b.shape), 5, "meta")).shape)


def _masked_scatter(self, mask, source, op):
    _need_tensor(op, mask, "mask")
    _need_tensor(op, source, "source")
    if mask._dtype != _BOOL:
        raise RuntimeError(f"{op}: only supports boolean masks, but got mask with dtype {mask.dtype}")
    if source._dtype != self._dtype:
        raise RuntimeError(f"{op}: expected self and source to have same dtypes but got {self.dtype} and "
                           f"{source.dtype}")
    shape = tuple(self.shape) if op.endswith("_") else _broadcast_shape(self, mask)
    mask = mask.expand(*shape) if tuple(mask.shape) != tuple(shape) else mask
    flat = _flat(mask).long()
    taken = flat.cumsum(0) - 1  # the source element each True entry takes, in order
    if mask._device != "meta":
        need = int(flat.sum())
        if need > source.numel():
            raise RuntimeError(f"{op}: Number of elements of source < number of ones in mask ({source.numel()} < "
                               f"{need})")
    if source.numel() == 0:
        return self.expand(*shape).clone()
    picked = _flat(source).gather(0, taken.clamp(0, source.numel() - 1)).reshape(shape)
    return _where(mask, picked, self)


# ---- order statistics -----------------------------------------------------------------------------------------
def _mode(x, dim, keepdim):
    """The most frequent value along dim (the smallest on ties; NaN counts as a value) and the last index of it."""
    d = _dim(dim, x.ndim, "mode") if x.ndim else 0
    if x.ndim and x.shape[d] == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    a = _host(x, "mode")
    a = np.moveaxis(a.reshape(a.shape or (1,)), d, -1)
    rows = a.reshape(-1, a.shape[-1]) if a.shape[-1] else np.zeros((int(np.prod(a.shape[:-1])), 0), a.dtype)
    idx = np.zeros(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        if not row.size:
            continue
        order = np.argsort(row, kind="stable")
        srt = row[order]
        same = np.concatenate([[False], (srt[1:] == srt[:-1]) | (np.isnan(srt[1:]) & np.isnan(srt[:-1]))])
        starts = np.flatnonzero(~same)
        counts = np.diff(np.append(starts, srt.size))
        best = int(np.argmax(counts))  # the first run of the largest count: the smallest such value
        idx[r] = order[starts[best] + counts[best] - 1]  # the last index of it (stable order)
    idx = idx.reshape(a.shape[:-1] + (1,)) if x.ndim else idx.reshape(())
    if not x.ndim:
        return _RESULT["mode"](x.clone(), _to_device(np.zeros((), np.int64), x, _I64))
    pick = _to_device(np.moveaxis(idx, -1, d), x, _I64)
    values = x.gather(d, pick)
    if not keepdim:
        values, pick = values.squeeze(d), pick.squeeze(d)
    return _RESULT["mode"](values, pick)


def _nanmedian(x, dim, keepdim):
    """The lower median of the non-NaN values (NaN where all are NaN), as PyTorch; with dim, (values, indices)."""
    if dim is None:
        flat = x.reshape(-1)
        if flat.numel() == 0:
            return _full((), math.nan, x._dtype, x._device)
        return _nanmedian(flat, 0, False).values
    d = _dim(dim, x.ndim, "nanmedian") if x.ndim else 0
    if not x.ndim:
        return _RESULT["nanmedian"](x.clone(), _full((), 0, _I64, x._device))
    if x.shape[d] == 0:
        raise IndexError(f"nanmedian(): Expected reduction dim {d} to have non-zero size.")
    order = x.argsort(d, stable=True)  # NaN sorts last
    valid = (x == x).sum(d, keepdim=True) if x._dtype in _FLOATS else \
        _full(tuple(x.shape[:d]) + (1,) + tuple(x.shape[d + 1:]), x.shape[d], _I64, x._device)
    k = ((valid - 1).clamp(min=0)).div(2, rounding_mode="floor")
    pick = order.gather(d, k)
    values = x.gather(d, pick)
    if not keepdim:
        values, pick = values.squeeze(d), pick.squeeze(d)
    return _RESULT["nanmedian"](values, pick)


def _nanquantile(x, q, dim, keepdim, interpolation):
    """quantile of the non-NaN values of each row (NaN where a row has none), interpolated as quantile does."""
    qs = _quantile_args(x, q, interpolation, "nanquantile")
    src = x.reshape(-1) if dim is None else x
    d = 0 if dim is None else _dim(dim, x.ndim, "nanquantile")
    if src.ndim == 0:
        src, d = src.reshape(1), 0
    s = src.sort(d)[0]  # NaN sorts last
    valid = (s == s).sum(d, keepdim=True)
    outs = []
    for qv in qs.reshape(-1):
        pos = (valid - 1).clamp(min=0).double() * float(qv)
        lo, hi = pos.floor(), pos.ceil()
        if interpolation == "lower":
            hi = lo
        elif interpolation == "higher":
            lo = hi
        elif interpolation == "nearest":
            lo = hi = pos.round()
        a, b = s.gather(d, lo.long()), s.gather(d, hi.long())
        w = 0.5 if interpolation == "midpoint" else (pos - lo).to(x.dtype)
        v = _where(valid == 0, math.nan, a + (b - a) * w)
        if dim is None:
            v = v.reshape(tuple(1 for _ in x.shape)) if keepdim else v.reshape(())
        elif not keepdim:
            v = v.squeeze(d)
        outs.append(v)
    if qs.ndim == 0:
        return outs[0]
    return _stack(outs)


def _renorm(x, p, dim, maxnorm):
    """Each slice along dim whose p-norm exceeds maxnorm scaled to norm maxnorm (by maxnorm / (norm + 1e-7))."""
    if x._dtype not in _FLOATS:  # PyTorch's type: no kernel for the dtype
        raise NotImplementedError(f"renorm: Expected a floating point or complex tensor as input. Got {x.dtype}")
    if not p > 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported (p={p})")
    if not maxnorm >= 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = _dim(dim, x.ndim, "renorm")
    if x.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {x.ndim} dimensions")
    others = [i for i in range(x.ndim) if i != d]
    # float16 / bfloat16: the norms in float32 (PyTorch's; a square of 300 is inf in float16), the factor rounded to
    # the input's dtype and multiplied there
    source, x = x, (x.float() if x._dtype in (2, 3) else x)
    if math.isinf(p):
        norm = x.abs().amax(others, keepdim=True)
    else:
        s = (x.abs() ** p).sum(others, keepdim=True)
        nz = s > 0  # the root's derivative at 0 is infinite: such slices are not scaled, so keep it out
        norm = _where(nz, _where(nz, s, 1.0) ** (1.0 / p), 0.0)
    scale = _where(norm > maxnorm, float(maxnorm) / (norm + 1e-7), 1.0)
    return source * scale.to(source.dtype)


# ---- index_reduce -------------------------------------------------------------------------------------------------
def _index_reduce(self, dim, index, source, reduce, include_self, op):
    """scatter_reduce with index (1-D, one entry per slice of source along dim) spread over source's shape."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"{op}(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    _need_tensor(op, index, "index")
    _need_tensor(op, source, "source")
    if index._dtype != _I64:
        raise RuntimeError(f"{op}(): Expected dtype int64 for index")
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, got index of shape {tuple(index.shape)}")
    d = _dim(dim, self.ndim, op) if self.ndim else 0
    if source.ndim != self.ndim:
        raise RuntimeError(f"{op}(): Source ({tuple(source.shape)}) and self ({tuple(self.shape)}) must have the same "
                           f"number of dimensions")
    n = source.shape[d] if source.ndim else 1
    if index.numel() != n:
        raise RuntimeError(f"{op}(): Number of indices ({index.numel()}) should be equal to source.size(dim) ({n})")
    for i in range(self.ndim):
        if i != d and source.shape[i] != self.shape[i]:
            raise RuntimeError(f"{op}(): self ({tuple(self.shape)}) and source ({tuple(source.shape)}) must have the "
                               f"same size in every dimension but dim {d}")
    size = self.shape[d] if self.ndim else 1
    if index.numel() and not 0 <= int(index.min()) <= int(index.max()) < size:  # (negative ones too: PyTorch's)
        raise IndexError(f"index out of range in self ({op}: indices must be in [0, {size}) along dim {d})")
    full = index.reshape(tuple(n if i == d else 1 for i in range(source.ndim))).expand(*source.shape) \
        if source.ndim else index.reshape(())
    return _scatter_reduce(self, d, F.contiguous(full), source, reduce, include_self, op)


# ---- select_scatter, slice_scatter, diagonal_scatter ---------------------------------------------------------------
class _EmbedInto(Function):
    """A copy of x with src written into the view region(t) picks: x's gradient is g outside the region, src's is
    the region of g."""

    @staticmethod
    def forward(ctx, x, src, region):
        ctx.region = region
        out = _copy(x)
        _C.copy_(region(out), src)
        return out

    @staticmethod
    def backward(ctx, g):
        g = F.contiguous(g)
        gx = gs = None
        if ctx.needs_input_grad[0]:
            gx = _copy(g)
            _C.fill_(ctx.region(gx), 0)
        if ctx.needs_input_grad[1]:
            gs = F.contiguous(ctx.region(g))
        return gx, gs, None


def _embed(x, src, region, op):
    _need_tensor(op, x)
    _need_tensor(op, src, "src")
    target = region(x.detach())
    if tuple(src.shape) != tuple(target.shape):
        raise RuntimeError(f"{op}(): expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(target.shape)}")
    if src._dtype != x._dtype:  # PyTorch writes it converted
        src = src.to(x.dtype)
    if _needs_grad(x, src):
        return _EmbedInto.apply(x, src, region)
    return _EmbedInto.forward(_Ctx(), x, src, region)


def select_scatter(input, src, dim, index):
    """A copy of input with src written into input.select(dim, index)."""
    _need_tensor("select_scatter", input)
    return _embed(input, src, lambda t: t.select(dim, index), "select_scatter")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of input with src written into input[..., start:end:step, ...] (that slice of dim)."""
    _need_tensor("slice_scatter", input)
    if step <= 0:
        raise RuntimeError(f"slice_scatter(): slice step must be positive, got {step}")
    d = _dim(dim, input.ndim, "slice_scatter")
    return _embed(input, src, lambda t: t[(slice(None),) * d + (slice(start, end, step),)], "slice_scatter")


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of input with src written into the copy's as_strided(size, stride, storage_offset) view."""
    _need_tensor("as_strided_scatter", input)
    return _embed(input, src, lambda t: t.as_strided(size, stride, storage_offset), "as_strided_scatter")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of input with src written into input.diagonal(offset, dim1, dim2)."""
    _need_tensor("diagonal_scatter", input)
    return _embed(input, src, lambda t: t.diagonal(offset, dim1, dim2), "diagonal_scatter")


class ValueMethods:
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
        """src's values reduced (sum, prod, mean, amax, amin) into a copy of self at index along dim; with
        include_self=False the entries index names start from src's values alone."""
        return _scatter_reduce(self, dim, index, src, reduce, include_self, "scatter_reduce")

    def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
        if write_recorded(self, "scatter_reduce_", (src,), lambda x: _scatter_reduce(
                x, dim, index, src, reduce, include_self, "scatter_reduce_")):
            return self
        _C.copy_(self, _scatter_reduce(self.detach(), dim, index, src.detach() if isinstance(
            src, _C.TensorBase) else src, reduce, include_self, "scatter_reduce_"))
        return self

    def masked_scatter(self, mask, source):
        """self with its entries where mask is True replaced by source's first values, in order."""
        return _masked_scatter(self, mask, source, "masked_scatter")

    def masked_scatter_(self, mask, source):
        if write_recorded(self, "masked_scatter_", (source,), lambda x: _masked_scatter(
                x, mask, source, "masked_scatter_")):
            return self
        _C.copy_(self, _masked_scatter(self.detach(), mask, source.detach() if isinstance(
            source, _C.TensorBase) else source, "masked_scatter_"))
        return self

    def index_reduce(self, dim, index, source, reduce, *, include_self=True):
        """source's slices along dim reduced (prod, mean, amax, amin) into a copy of self at the entries index
        names; with include_self=False those entries start from source's values alone."""
        return _index_reduce(self, dim, index, source, reduce, include_self, "index_reduce")

    def index_reduce_(self, dim, index, source, reduce, *, include_self=True):
        if write_recorded(self, "index_reduce_", (source,), lambda x: _index_reduce(
                x, dim, index, source, reduce, include_self, "index_reduce_")):
            return self
        _C.copy_(self, _index_reduce(self.detach(), dim, index, source.detach() if isinstance(
            source, _C.TensorBase) else source, reduce, include_self, "index_reduce_"))
        return self

    def select_scatter(self, src, dim, index):
        return select_scatter(self, src, dim, index)

    def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
        return slice_scatter(self, src, dim, start, end, step)

    def as_strided_scatter(self, src, size, stride, storage_offset=None):
        return as_strided_scatter(self, src, size, stride, storage_offset)

    def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
        return diagonal_scatter(self, src, offset, dim1, dim2)

    def mode(self, dim=-1, keepdim=False):
        return _mode(self, dim, keepdim)

    def nanmedian(self, dim=None, keepdim=False):
        return _nanmedian(self, dim, keepdim)

    def nanquantile(self, q, dim=None, keepdim=False, *, interpolation="linear"):
        return _nanquantile(self, q, dim, keepdim, interpolation)

    def renorm(self, p, dim, maxnorm):
        return _renorm(self, p, dim, maxnorm)

    def renorm_(self, p, dim, maxnorm):
        """In place; in a graph (a view of one too) recorded as PyTorch records it."""
        if not record_in_place(self, "renorm_", lambda t: _renorm(t, p, dim, maxnorm)):
            _C.copy_(self, _renorm(self.detach(), p, dim, maxnorm))
        return self


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    _need_tensor("scatter_reduce", input)
    return input.scatter_reduce(dim, index, src, reduce, include_self=include_self)


def masked_scatter(input, mask, source):
    _need_tensor("masked_scatter", input)
    return input.masked_scatter(mask, source)


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    _need_tensor("index_reduce", input)
    return input.index_reduce(dim, index, source, reduce, include_self=include_self)


def mode(input, dim=-1, keepdim=False):
    _need_tensor("mode", input)
    return input.mode(dim, keepdim)


def nanmedian(input, dim=None, keepdim=False):
    _need_tensor("nanmedian", input)
    return input.nanmedian(dim, keepdim)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    _need_tensor("nanquantile", input)
    return input.nanquantile(q, dim, keepdim, interpolation=interpolation)


def renorm(input, p, dim, maxnorm):
    _need_tensor("renorm", input)
    return input.renorm(p, dim, maxnorm)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """elements' entries that appear in test_elements (either may be a number), as a bool tensor of elements'
    shape. Compared on the device (every pair) for small inputs, on the host (np.isin) for large ones."""
    if not isinstance(elements, _C.TensorBase) and not isinstance(test_elements, _C.TensorBase):
        raise TypeError(f"isin(): elements or test_elements must be a Tensor, got {type(elements).__name__} and "
                        f"{type(test_elements).__name__}")
    for name, v in (("elements", elements), ("test_elements", test_elements)):
        if not isinstance(v, (_C.TensorBase, numbers.Number)) or isinstance(v, complex):
            raise TypeError(f"isin(): argument '{name}' must be Tensor or Number, not {type(v).__name__}")
    like = elements if isinstance(elements, _C.TensorBase) else test_elements
    if not isinstance(elements, _C.TensorBase):
        elements = _full((), elements, _I64 if isinstance(elements, numbers.Integral) else like._dtype,
                           like._device)
    if not isinstance(test_elements, _C.TensorBase):
        out = elements == test_elements
        return ~out if invert else out
    if elements.numel() * test_elements.numel() <= 1 << 22:
        found = (elements.reshape(-1, 1) == test_elements.reshape(1, -1)).any(1) if test_elements.numel() else \
            _full((elements.numel(),), False, _BOOL, elements._device)
        out = found.reshape(tuple(elements.shape))
        return ~out if invert else out
    a, b = _host(elements, "isin"), _host(test_elements, "isin")
    return _to_device(np.isin(a, b, invert=invert), elements, _BOOL)
