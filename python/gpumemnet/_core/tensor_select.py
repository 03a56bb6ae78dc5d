"""Tensor methods that write or pick entries by index or by value: scatter (one-hot labels, label smoothing),
index_add / index_copy / index_fill, masked_select, and the ones whose result size depends on the values:
nonzero, unique, unique_consecutive, bincount, count_nonzero.

The scatters are one flat _C.index_put_ into the contiguous result (accumulating for the add forms), on every
device. The value-dependent ones compute on the host (NumPy) from a copy of the values, as PyTorch's CUDA versions
also wait for the device, and put the result on the tensor's device; on meta they raise, since a meta tensor has no
values to size the result by. The in-place forms write where no graph is recorded; on a tensor in a graph they
raise and name the out-of-place form, which records."""
import numbers

import numpy as np

from .. import _C
from . import autocast as _amp
from . import functions as F
from .autograd import Function, needs_grad as _needs_grad
from .indexing import index_put_into as _put_into, write_recorded
from .tensor_methods import _checked_indices, _dim, long_index, no_negative
from . import size as _size
from .dtype import bool_, fitting

_I64, _BOOL = 4, 5
Size = _size.Size  # its home before size.py: pickles that name it here still load


# ---- scatter ----------------------------------------------------------------------------------------------------
def zero_dim_as_one(self, index, src):
    """(index, src) with a 0-d index (and a 0-d src) seen as 1-d, beside a 1-d self: PyTorch treats 0-d tensors
    as 1-d in scatter and gather (the Transforms tutorial's one-hot `zeros(10).scatter_(0, tensor(y), value=1)`)."""
    if isinstance(index, _C.TensorBase) and index.ndim == 0 and self.ndim == 1:
        index = index.reshape(1)
        if isinstance(src, _C.TensorBase) and src.ndim == 0:
            src = src.reshape(1)
    return index, src


def _scatter_args(self, dim, index, src, op):
    """Checked (dim, index, src): src a tensor of self's dtype, or a number; an int32 index is widened (PyTorch
    takes int32 indices: NumPy's and pandas' codes)."""
    index = long_index(index)
    if not isinstance(index, _C.TensorBase) or index._dtype != _I64:
        raise RuntimeError(f"{op}(): Expected dtype int64 for index")
    d = _dim(dim, self.ndim, op)
    if index.ndim != self.ndim:
        raise RuntimeError(f"{op}: index of shape {tuple(index.shape)} must have the same number of dimensions as "
                           f"self of shape {tuple(self.shape)}")
    for i in range(self.ndim):
        if i != d and index.shape[i] > self.shape[i]:
            raise RuntimeError(f"{op}: expected index {tuple(index.shape)} to be smaller than self "
                               f"{tuple(self.shape)} apart from dimension {d}")
    if isinstance(src, _C.TensorBase):
        if src.ndim != self.ndim or any(index.shape[i] > src.shape[i] for i in range(self.ndim)):
            raise RuntimeError(f"{op}: expected index {tuple(index.shape)} to be smaller than src "
                               f"{tuple(src.shape)} in every dimension (and of the same number of dimensions)")
        if src._dtype != self._dtype:
            raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype ({self.dtype} and "
                               f"{src.dtype})")
    elif not isinstance(src, numbers.Number):
        raise TypeError(f"{op}: src must be a Tensor or a number, got {type(src).__name__}")
    n = self.shape[d] if self.ndim else 1
    return d, _checked_indices(index, n, d, negative_wraps=False)


def _positions(shape, index, d):
    """For each entry of index: its flat position in a contiguous tensor of `shape`, dim d taken from index."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    pos = _C.binary(F.MUL, index, strides[d]) if shape else index
    for i in range(len(shape)):
        if i != d and index.shape[i] > 1:
            ramp = _C.arange(0.0, float(index.shape[i]), 1.0, _I64, index._device)
            ramp = ramp._view(tuple(index.shape[i] if j == i else 1 for j in range(len(shape))))
            pos = _C.binary(F.ADD, pos, _C.binary(F.MUL, ramp, strides[i]))
    return F.contiguous(pos)._view((-1,)) if pos.ndim else pos._view((1,))


def _covered(src, index):
    """The part of src that index covers (src may be larger), contiguous and flat."""
    for i in range(src.ndim):
        if src.shape[i] != index.shape[i]:
            src = src._slice(i, 0, index.shape[i], 1)
    return F.contiguous(src)._view((-1,)) if src.ndim else src._view((1,))


def _scatter_into(out, d, index, src, accumulate):
    """out (contiguous) gets src at index along d, in place."""
    if index.numel() == 0:
        return out
    pos = _positions(tuple(out.shape), index, d)
    values = _covered(src, index) if isinstance(src, _C.TensorBase) else src
    _put_into(out._view((-1,)) if out.ndim else out._view((1,)), 0, pos, values, accumulate, wide_halves=True)
    return out


def _copy(t):
    out = _C.empty(tuple(t.shape), t._dtype, t._device)
    _C.copy_(out, t)
    return out


class _Scatter(Function):
    @staticmethod
    def forward(ctx, x, d, index, src, accumulate):
        ctx.d, ctx.accumulate = d, accumulate
        ctx.src_meta = (tuple(src.shape), src._dtype) if isinstance(src, _C.TensorBase) else None
        ctx.save_for_backward(index)
        return _scatter_into(_copy(x), d, index, src, accumulate)

    @staticmethod
    def backward(ctx, g):
        index, = ctx._unpacked
        gx = gs = None
        if ctx.needs_input_grad[0]:  # scatter's written entries take nothing back; scatter_add's all do
            gx = g if ctx.accumulate else _scatter_into(_copy(g), ctx.d, index, 0.0, False)
        if ctx.src_meta is not None and ctx.needs_input_grad[3]:
            picked = g.gather(ctx.d, index)
            shape, dt = ctx.src_meta
            gs = picked if tuple(picked.shape) == shape else _padded(picked, shape)
        return gx, None, None, gs, None


def _padded(t, shape):
    out = _C.empty(shape, t._dtype, t._device)
    _C.fill_(out, 0)
    region = out
    for i in range(len(shape)):
        region = region._slice(i, 0, t.shape[i], 1)
    _C.copy_(region, t)
    return out


def _scatter(self, dim, index, src, reduce, op, accumulate, in_place):
    if reduce == "multiply":  # the deprecated form of scatter_reduce's "prod", self's values included
        if not isinstance(src, _C.TensorBase):
            src = _C.fill_(_C.empty(tuple(index.shape), self._dtype, self._device), src)
        return (self.scatter_reduce_ if in_place else self.scatter_reduce)(dim, index, src, "prod")
    if reduce is not None:
        if reduce != "add":
            raise RuntimeError(f"{op}: reduce argument must be either add or multiply, got {reduce}")
        accumulate = True
    index, src = zero_dim_as_one(self, index, src)
    d, index = _scatter_args(self, dim, index, src, op)
    if in_place:
        if write_recorded(self, op, (src,), lambda x: _scatter(x, d, index, src, None, op, accumulate, False)):
            return self
        if isinstance(src, _C.TensorBase) and src._storage_id == self._storage_id:
            src = _copy(src)
        if self._is_contiguous():
            return _scatter_into(self, d, index, src, accumulate)
        _C.copy_(self, _scatter_into(_copy(self), d, index, src, accumulate))
        return self
    if _needs_grad(self, src if isinstance(src, _C.TensorBase) else None):
        return _Scatter.apply(self, d, index, src, accumulate)
    return _scatter_into(_copy(self), d, index, src, accumulate)


def _unique_consecutive(self, d, return_inverse, return_counts):
    """Each run of equal consecutive values once over the flattened tensor (d None: the inverse has self's shape),
    or of equal consecutive slices along dim d."""
    a = _host(self, "unique_consecutive")
    a = a.reshape(-1) if d is None else np.moveaxis(a.reshape(tuple(self.shape) or (1,)), d, 0)
    n = a.shape[0]
    changed = (a[1:] != a[:-1]).reshape(n - 1, -1).any(1) if n > 1 else np.zeros(0, bool)
    starts = np.flatnonzero(np.concatenate(([True], changed))) if n else np.zeros(0, np.int64)
    out = [_to_device(a[starts] if d is None else np.ascontiguousarray(np.moveaxis(a[starts], 0, d)), self)]
    if return_inverse:
        inverse = (np.cumsum(np.isin(np.arange(n), starts)) - 1).astype(np.int64)
        out.append(_to_device(inverse.reshape(tuple(self.shape)) if d is None else inverse, self, _I64))
    if return_counts:
        out.append(_to_device(np.diff(np.append(starts, n)).astype(np.int64), self, _I64))
    return out[0] if len(out) == 1 else tuple(out)


# ---- index_add, index_copy, index_fill ---------------------------------------------------------------------
def _index_args(self, dim, index, op):
    if not op.startswith("index_copy"):  # PyTorch's index_copy alone refuses int32
        index = long_index(index)
    if not isinstance(index, _C.TensorBase) or index._dtype != _I64:
        # PyTorch's index_fill says IndexError, index_add and index_copy RuntimeError
        raise (IndexError if op.startswith("index_fill") else RuntimeError)(f"{op}(): Expected dtype int64 for index")
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, got shape {tuple(index.shape)}")
    d = _dim(dim, self.ndim, op)
    if not op.startswith("index_fill"):  # index_fill wraps -1, as PyTorch's does
        no_negative(index, self.shape[d] if self.ndim else 1, d, op)
    return d, index.reshape(-1)



class _IndexPut(Function):
    """index_add (accumulate) / index_copy / index_fill (src a number) along d, out of place."""

    @staticmethod
    def forward(ctx, x, d, index, src, accumulate, alpha):
        ctx.d, ctx.accumulate, ctx.alpha = d, accumulate, alpha
        ctx.save_for_backward(index)
        return _put(_copy(x), d, index, src, accumulate, alpha)

    @staticmethod
    def backward(ctx, g):
        index, = ctx._unpacked
        gx = gs = None
        if ctx.needs_input_grad[0]:
            gx = g
            if not ctx.accumulate:  # overwritten entries take nothing back
                gx = _copy(g)
                _C.index_put_(gx, ctx.d, index, 0.0, False)
        if ctx.needs_input_grad[3]:
            gs = _C.index(g, ctx.d, index)
            if ctx.alpha != 1:
                gs = _C.binary(F.MUL, gs, ctx.alpha)
        return gx, None, None, gs, None, None


def _index_put(self, dim, index, src, accumulate, alpha, op, in_place):
    d, index = _index_args(self, dim, index, op)
    if isinstance(src, _C.TensorBase) and src._dtype != self._dtype:
        raise RuntimeError(f"{op}(): self ({self.dtype}) and source ({src.dtype}) must have the same scalar type")
    if isinstance(src, _C.TensorBase):
        _check_source(self, d, index, src, op)
    if in_place:
        if write_recorded(self, op, (src,), lambda x: _index_put(x, d, index, src, accumulate, alpha, op, False)):
            return self
        return _put(self, d, index, src, accumulate, alpha)
    if _needs_grad(self, src if isinstance(src, _C.TensorBase) else None):
        return _IndexPut.apply(self, d, index, src, accumulate, alpha)
    return _put(_copy(self), d, index, src, accumulate, alpha)


def _check_source(self, d, index, src, op):
    """PyTorch's rule (broadcasting the source would hide a bug): source has self's shape but along dim, where it
    has one slice per index. Its error types: IndexError from index_copy for a count of slices that differs,
    RuntimeError otherwise."""
    n, want = index.numel(), list(self.shape)
    if want:
        want[d] = n
    if list(src.shape) == want or not want and src.ndim == 0 and n == 1:
        return
    if op.startswith("index_copy") and len(want) == 1 and src.ndim == 0 and n == 1:
        return  # PyTorch's index_copy writes a 0-d source into one entry of a 1-D self (its index_add refuses it)
    count_only = src.ndim == len(want) and all(a == b for i, (a, b) in enumerate(zip(src.shape, want)) if i != d)
    err = IndexError if op.startswith("index_copy") and count_only else RuntimeError
    raise err(f"{op}(): source of shape {tuple(src.shape)} does not fit self of shape {tuple(self.shape)} with "
              f"{n} indices along dim {d}: expected source of shape {tuple(want)} (Number of indices ({n}) should "
              f"be equal to source.size(dim))")


def _put(out, d, index, src, accumulate, alpha):
    """out along d at index gets src (times alpha; added with accumulate), in place; returns out. Half-precision
    sums of slices are made in float32, of single elements (a 1-D out) in the half type, as PyTorch's index_add."""
    if isinstance(src, _C.TensorBase) and alpha != 1:
        src = _C.binary(F.MUL, src, alpha)
    _put_into(out, d, index, src, accumulate, wide_halves=out.ndim > 1)
    return out


# ---- results sized by the values ---------------------------------------------------------------------------
def _host(t, op):
    """t's values as a NumPy array (a copy from the device if need be); meta has none."""
    if t._device == "meta":
        raise NotImplementedError(f"{op}: the result depends on the tensor's values, which a meta tensor does not "
                                  f"have (an estimate cannot compute it; run it on a real device)")
    t = t.detach()
    if t._dtype in (2, 3):  # float16 / bfloat16: NumPy has no bfloat16
        t = F.cast(t, 0)
    return _C.TensorBase.numpy(t.cpu() if t._device != "cpu" else t)


def _to_device(array, like, dtype=None):
    array = np.asarray(array, order="C")  # not ascontiguousarray, which makes a 0-d array 1-d
    return _C.from_numpy(array, like._dtype if dtype is None else dtype, like._device)


class SelectMethods:
    """The scatter, index_* and value-dependent methods of Tensor (see the module docstring)."""
    __slots__ = ()

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        """A copy of self with src's entries (or a number) written at index along dim: for dim 1,
        out[i][index[i][j]] = src[i][j]. Indices outside [0, size) raise."""
        return _scatter(self, dim, index, value if src is None else src, reduce, "scatter", False, False)

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        return _scatter(self, dim, index, value if src is None else src, reduce, "scatter_", False, True)

    def scatter_add(self, dim, index, src):
        """scatter that adds into self (repeated indices add up)."""
        return _scatter(self, dim, index, src, None, "scatter_add", True, False)

    def scatter_add_(self, dim, index, src):
        return _scatter(self, dim, index, src, None, "scatter_add_", True, True)

    def index_add(self, dim, index, source, *, alpha=1):
        """A copy of self with alpha * source added at the entries index names along dim (repeats add up)."""
        return _index_put(self, dim, index, source, True, alpha, "index_add", False)

    def index_add_(self, dim, index, source, *, alpha=1):
        return _index_put(self, dim, index, source, True, alpha, "index_add_", True)

    def index_copy(self, dim, index, source):
        self, source = _amp.promote(self, source)  # (on autocast's promote list)
        return _index_put(self, dim, index, source, False, 1, "index_copy", False)

    def index_copy_(self, dim, index, source):
        return _index_put(self, dim, index, source, False, 1, "index_copy_", True)

    def index_fill(self, dim, index, value):
        if isinstance(value, _C.TensorBase) and value.requires_grad:
            return self.masked_fill(_filled(self, dim, index, value, "index_fill"), value)
        return _index_put(self, dim, index, fitting(_number(value, "index_fill"), self._dtype), False, 1, "index_fill", False)

    def index_fill_(self, dim, index, value):
        if isinstance(value, _C.TensorBase) and value.requires_grad:
            return self.masked_fill_(_filled(self, dim, index, value, "index_fill_"), value)
        return _index_put(self, dim, index, fitting(_number(value, "index_fill_"), self._dtype), False, 1, "index_fill_", True)

    def masked_select(self, mask):
        """The entries where mask (broadcast with self) is True, as a 1-D tensor (differentiable)."""
        if not isinstance(mask, _C.TensorBase) or mask._dtype != _BOOL:
            raise RuntimeError(f"masked_select: expected BoolTensor for mask, got "
                               f"{mask.dtype if isinstance(mask, _C.TensorBase) else type(mask).__name__}")
        shape = tuple(np.broadcast_shapes(tuple(self.shape), tuple(mask.shape)))
        x = self if tuple(self.shape) == shape else self.expand(shape)
        m = mask if tuple(mask.shape) == shape else mask.expand(shape)
        return x.reshape(-1)[m.reshape(-1)]

    def nonzero(self, *, as_tuple=False):
        """The indices of the nonzero entries: an (n, ndim) int64 tensor, or with as_tuple one vector per dim."""
        a = _host(self, "nonzero") != 0
        if a.ndim == 0:
            a = a.reshape(1)
            idx = np.argwhere(a)[:, :0] if not as_tuple else np.argwhere(a)
        else:
            idx = np.argwhere(a)
        if as_tuple:
            return tuple(_to_device(idx[:, i], self, _I64) for i in range(idx.shape[1]))
        # PyTorch's layout: column-major, strides (1, n), so that nonzero().t() is contiguous (PyG's edge_index =
        # adj.nonzero().t() then .view(-1))
        n, d = idx.shape
        out = _to_device(np.ascontiguousarray(idx.T, dtype=np.int64), self, _I64)
        out._set_data(out._as_strided((n, d), (1, n), out._offset))
        return out

    argwhere = nonzero

    def count_nonzero(self, dim=None):
        """How many entries are not zero, over dim (an int or a tuple; all by default), as int64."""
        return (self != 0).sum(dim) if dim is not None else (self != 0).sum()

    def unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
        """The distinct values (sorted; dim: the distinct slices along dim), with the inverse indices (where
        each entry went) and the counts on request."""
        a = _host(self, "unique")
        d = None if dim is None else _dim(dim, self.ndim, "unique")
        # NaNs stay distinct (NumPy merges them by default; PyTorch keeps each, sorted last)
        kw = {"equal_nan": False} if d is None else {}
        values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True, axis=d, **kw)
        out = [_to_device(values, self)]
        if return_inverse:
            shape = tuple(self.shape) if d is None else (self.shape[d],)
            out.append(_to_device(inverse.reshape(shape).astype(np.int64), self, _I64))
        if return_counts:
            out.append(_to_device(counts.astype(np.int64), self, _I64))
        return out[0] if len(out) == 1 else tuple(out)

    def unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
        """Each run of equal consecutive values once (over the flattened tensor), or of equal consecutive slices
        along dim (the torchaudio tutorial's greedy CTC decoder: dim=-1 of a 1-D tensor)."""
        d = None if dim is None else _dim(dim, max(self.ndim, 1), "unique_consecutive")
        return _unique_consecutive(self, d, return_inverse, return_counts)

    def bincount(self, weights=None, minlength=0):
        """How often each value 0..max occurs in a 1-D non-negative integer tensor (the sum of weights, with
        weights); at least minlength bins."""
        if self._dtype in (0, 1, 2, 3, _BOOL):
            raise NotImplementedError(f"bincount: not implemented for {self.dtype} (it counts 1-d non-negative "
                                      f"integers)")
        if self.ndim != 1:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
        if not isinstance(minlength, numbers.Integral) or minlength < 0:
            raise RuntimeError("minlength should be >= 0")
        a = _host(self, "bincount").astype(np.int64)
        if a.size and a.min() < 0:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
        if weights is None:
            return _to_device(np.bincount(a, minlength=int(minlength)).astype(np.int64), self, _I64)
        if not isinstance(weights, _C.TensorBase) or tuple(weights.shape) != tuple(self.shape):
            raise RuntimeError(f"weights should be 1-d and have the same length as input, got "
                               f"{tuple(weights.shape) if isinstance(weights, _C.TensorBase) else weights!r} for "
                               f"input {tuple(self.shape)}")
        counts = np.bincount(a, weights=_host(weights, "bincount").astype(np.float64), minlength=int(minlength))
        code = weights._dtype if weights._dtype in (0, 1) else 1  # PyTorch: float weights keep their dtype
        return _to_device(counts.astype(np.float32 if code == 0 else np.float64), weights, code)


def _filled(x, dim, index, value, op):
    """The mask of the entries index_fill writes, for a value tensor requiring grad: masked_fill with it gives the
    value its gradient (the sum of the filled entries' gradients), as PyTorch's index_fill does."""
    _number(value, op)  # its checks: a 0-d value
    return x.new_zeros(x.shape, dtype=bool_).index_fill_(dim, index, True)


def _number(value, op):
    if isinstance(value, _C.TensorBase):
        if value.ndim != 0:
            raise RuntimeError(f"{op} only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        return value.item()
    if not isinstance(value, numbers.Number):
        raise TypeError(f"{op}: value must be a number, got {type(value).__name__}")
    return value
