"""PyTorch's Tensor methods that are compositions of other Tensor ops: splitting, repeating, rounding, the new_*
constructors, logical tests, prod/norm, memory formats. gpumemnet.Tensor takes them (TensorMethods is the
first of the mixins tensor.py copies into it), so each is differentiable, runs on every device and is priced on
meta for free, because every step is an op that already is. Where a composition costs more memory than PyTorch's
fused op, the method says so."""
import math
import numbers

import numpy as np

from .. import _C
from .arg_forms import as_int
from .return_types import ValuesIndices as _RESULT
from . import autocast as _amp
from . import functions as F
from .autograd import Function, check_inplace as _check_inplace, needs_grad as _needs_grad
from .dtype import DTYPES, as_dtype, device_str, fitting, format_copy, memory_format
from .indexing import SplitFn, write_recorded
from .indexing_multi import take_flat
from .tensor_math import DivFloor, matmul_tensors

_BOOL = 5
_I32 = 9  # int32's dtype code
_UINT8 = 6
_FLOAT_CODES = (0, 1, 2, 3)


class _Rounding(Function):
    """round/floor/ceil: the derivative is 0 almost everywhere (PyTorch returns zeros too)."""

    @staticmethod
    def forward(ctx, a, op):
        return _C.unary(op, a)

    @staticmethod
    def backward(ctx, g):
        return F.cast(_C.binary(F.MUL, g, 0.0), g._dtype), None


def _rounding(t, op, name):
    if not isinstance(t, _C.TensorBase):
        raise TypeError(f"{name}: expected a Tensor, got {type(t).__name__}")
    if t._dtype not in _FLOAT_CODES:
        return t.clone()  # an integer (or bool) is its own rounding; PyTorch returns a copy
    return _Rounding.apply(t, op) if _needs_grad(t) else _C.unary(op, t)


def _dim(dim, ndim, op):
    n = max(ndim, 1)
    dim = as_int(dim)
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if not -n <= dim < n:
        raise IndexError(f"{op}: dimension {dim} is out of range for a tensor with {ndim} dimensions "
                         f"(expected to be in range of [{-n}, {n - 1}])")
    return dim % n


def _dims_arg(dim, ndim, op):
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        return tuple(_dim(d, ndim, op) for d in dim)
    return _dim(dim, ndim, op)


class TensorMethods:
    """The composed methods of gpumemnet.Tensor (see the module docstring)."""
    __slots__ = ()

    # ---- division and rounding ----------------------------------------------------------------------------
    def div(self, other, *, rounding_mode=None):
        """True division; rounding_mode='trunc' or 'floor' rounds the quotient (integer inputs then keep an
        integer result, computed exactly in integers, as in PyTorch)."""
        ints = self._dtype not in _FLOAT_CODES and (
            not isinstance(other, _C.TensorBase) or other._dtype not in _FLOAT_CODES) and \
            not isinstance(other, float)
        if rounding_mode == "floor":  # integers exactly; floats as Python's // (1.0 // 0.1 is 9, floor(1.0 / 0.1) 10)
            return self.floor_divide(other) if ints or not _needs_grad(self, other) else DivFloor.apply(self, other)
        if ints and rounding_mode == "trunc":  # floor, moved up by one where the signs differ and b does not divide a
            q = self.floor_divide(other)
            fix = (self - q * other != 0) & ((self < 0) != (_as_tensor_like(other, self) < 0))
            return q + fix.to(q.dtype)  # q's dtype (int32 stays int32, as PyTorch's)
        q = self / other
        if rounding_mode is None:
            return q
        if rounding_mode == "trunc":
            q = q.trunc()
        else:
            raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        return q

    divide = div
    true_divide = div

    def round(self, decimals=0):
        """Round half to even (PyTorch and NumPy's rule). decimals != 0 scales by 10**decimals first, rounds,
        and scales back, as PyTorch does (so the result carries the same float error as PyTorch's)."""
        if not isinstance(decimals, numbers.Integral):
            raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}")
        if decimals == 0 or self._dtype not in _FLOAT_CODES:
            return _rounding(self, F.ROUND, "round")
        if decimals > 0:
            p = 10.0 ** decimals
            return _rounding(self * p, F.ROUND, "round") / p
        p = 10.0 ** -decimals
        return _rounding(self / p, F.ROUND, "round") * p

    def floor(self): return _rounding(self, F.FLOOR, "floor")
    def ceil(self): return _rounding(self, F.CEIL, "ceil")

    def trunc(self):
        if self._dtype not in _FLOAT_CODES:
            return self.clone()
        return _where(self < 0, self.ceil(), self.floor())

    fix = trunc

    def square(self): return self.long() * self.long() if self._dtype == 5 else self * self  # bool: int64
    def rsqrt(self):  # halves in float32, rounded once (twice in the half type), as PyTorch's
        return (1.0 / self.float().sqrt()).to(self.dtype) if self._dtype in (2, 3) else 1.0 / self.sqrt()
    def clamp_min(self, min): return self.clamp(min=min)
    def clamp_max(self, max): return self.clamp(max=max)

    # ---- splitting and joining ----------------------------------------------------------------------------------
    def narrow(self, dim, start, length):
        """A view of `length` entries of dim from `start` (negative start counts from the end)."""
        d = _dim(dim, self.ndim, "narrow")
        if self.ndim == 0:
            raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
        size = self.shape[d]
        start, length = int(start), int(length)
        if not -size <= start <= size:
            raise IndexError(f"narrow: start ({start}) is out of range for dimension {dim} of size {size} "
                             f"(expected to be in range of [{-size}, {size}])")
        if start < 0:
            start += size
        if length < 0:
            raise RuntimeError(f"narrow(): length must be non-negative, got {length}")
        if start + length > size:
            raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
        return self[(slice(None),) * d + (slice(start, start + length),)]

    def split(self, split_size_or_sections=None, dim=0, *, split_size=None):
        """Pieces of split_size along dim (the last may be smaller), or pieces of the listed sizes; views.
        (Tensor.split names its first argument split_size, torch.split split_size_or_sections: both are taken.)"""
        if split_size is not None:
            split_size_or_sections = split_size
        if split_size_or_sections is None:
            raise TypeError("split() missing required argument 'split_size' (pos 1)")
        d = _dim(dim, self.ndim, "split")
        size = self.shape[d]
        if isinstance(split_size_or_sections, numbers.Integral):
            step = int(split_size_or_sections)
            if step < 0 or (step == 0 and size != 0):
                raise RuntimeError(f"split expects split_size be non-negative, but got split_size={step}")
            if step == 0:
                return (self,)
            sizes = [min(step, size - s) for s in range(0, size, step)] or [0]
        else:
            sizes = [int(s) for s in split_size_or_sections]
            if any(s < 0 for s in sizes) or sum(sizes) != size:
                raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                                   f"size at dimension {d}), but got split_sizes={sizes}")
        if len(sizes) > 1 and _needs_grad(self):  # one node for all pieces: backward one cat
            return SplitFn.apply(self, sizes, d)
        out, start = [], 0
        for s in sizes:
            out.append(self.narrow(d, start, s))
            start += s
        return tuple(out)

    def tensor_split(self, indices_or_sections=None, dim=0, *, indices=None, sections=None,
                     tensor_indices_or_sections=None):
        """Views along dim: `sections` parts (the first size % sections one longer), or the parts between the
        given indices, which wrap when negative and clamp as Python slices do (NumPy's array_split). The keyword
        forms are PyTorch's overloads; a tensor argument is a 0-d section count or 1-d indices."""
        given = [v for v in (indices_or_sections, indices, sections, tensor_indices_or_sections) if v is not None]
        if len(given) != 1:
            raise TypeError("tensor_split() expected exactly one of indices_or_sections, indices, sections or "
                            f"tensor_indices_or_sections, got {len(given)}")
        spec = given[0]
        if isinstance(spec, _C.TensorBase):
            spec = int(spec.item()) if spec.ndim == 0 else [int(v) for v in spec.tolist()]
        d = _dim(dim, self.ndim, "tensor_split")
        size = self.shape[d]
        if isinstance(spec, numbers.Integral):
            n = int(spec)
            if n <= 0:
                raise RuntimeError(f"number of sections must be larger than 0, got {n}")
            q, r = divmod(size, n)
            sizes = [q + 1] * r + [q] * (n - r)
            starts = [sum(sizes[:i]) for i in range(n)]
        else:
            bounds = [0] + [slice(int(i), None).indices(size)[0] for i in spec] + [size]
            starts = bounds[:-1]
            sizes = [max(b - a, 0) for a, b in zip(bounds, bounds[1:])]
        return tuple(self.narrow(d, a, s) for a, s in zip(starts, sizes))

    def chunk(self, chunks, dim=0):
        """At most `chunks` views of ceil(size / chunks) entries each (PyTorch's rule: maybe fewer chunks)."""
        chunks = as_int(chunks)
        if not isinstance(chunks, numbers.Integral) or chunks <= 0:
            raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
        d = _dim(dim, self.ndim, "chunk")
        size = self.shape[d]
        step = -(-size // chunks)
        if step == 0:
            return tuple(self.narrow(d, 0, 0) for _ in range(chunks))
        return self.split(step, d)

    def unbind(self, dim=0):
        d = _dim(dim, self.ndim, "unbind")
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))

    def select(self, dim, index):
        d = _dim(dim, self.ndim, "select")
        return self[(slice(None),) * d + (index,)]

    def index_select(self, dim, index):
        if not isinstance(index, _C.TensorBase) or index.ndim > 1:
            raise TypeError("index_select: index must be a 0-d or 1-D int64 tensor")
        d = _dim(dim, self.ndim, "index_select")
        if self.ndim == 0:  # one entry, and the result is 0-d again (PyTorch's)
            return self.reshape(1).index_select(0, index).reshape(())
        index = long_index(index)
        no_negative(index, self.shape[d], d, "index_select")
        try:
            return self[(slice(None),) * d + (index.reshape(-1),)]
        except IndexError as e:  # out of bounds: PyTorch's CPU kernels say RuntimeError along dim 1 of a tensor of
            if "out of bounds" not in str(e):  # 2 or more dims, IndexError along any other
                raise
            if d != 1 or self.ndim < 2:
                raise IndexError(f"index out of range in self ({e})") from None
            raise RuntimeError(f"index_select(): INDICES element is out of DATA bounds ({e})") from None

    def repeat(self, *sizes):
        """Tile the tensor: one materialised copy of the result, as PyTorch's repeat."""
        sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)
        if len(sizes) < self.ndim:
            raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions "
                               "of tensor")
        if any(int(s) < 0 for s in sizes):
            raise RuntimeError(f"Trying to create tensor with negative dimension: repeat sizes {sizes}")
        shape = (1,) * (len(sizes) - self.ndim) + tuple(self.shape)
        inter = tuple(v for s in shape for v in (1, s))
        big = tuple(v for r, s in zip(sizes, shape) for v in (int(r), s))
        out = tuple(int(r) * s for r, s in zip(sizes, shape))
        r = self.reshape(inter).expand(big).reshape(out)
        # PyTorch's repeat returns new memory; reshape may give a view (stride 0, or self): writes would alias
        if not r.is_contiguous():
            return r.contiguous()
        return r.clone() if r._alloc_serial == self._alloc_serial else r

    def diff(self, n=1, dim=-1, prepend=None, append=None):
        """The n-th forward difference along dim (bool tensors: != of neighbours, as PyTorch), with prepend /
        append concatenated first (n=0: the input itself, prepend / append not added, as PyTorch's)."""
        if self.ndim == 0:
            raise RuntimeError("diff expects input to be at least one-dimensional")
        if not isinstance(n, numbers.Integral) or n < 0:
            raise RuntimeError(f"order must be non-negative but got {n}")
        d = _dim(dim, self.ndim, "diff")
        x = self
        if n and (prepend is not None or append is not None):
            parts = [p if isinstance(p, _C.TensorBase) else _C.from_numpy(np.asarray(p), self._dtype, self._device)
                     for p in (prepend, self, append) if p is not None]
            x = F.Cat.apply(d, *parts) if _needs_grad(*parts) else _C.cat(parts, d)
        for _ in range(int(n)):
            size = x.shape[d]
            if size <= 1:
                return x.narrow(d, 0, 0)
            hi, lo = x.narrow(d, 1, size - 1), x.narrow(d, 0, size - 1)
            x = hi != lo if x._dtype == _BOOL else hi - lo
        return x

    def view_as(self, other): return self.view(tuple(other.shape))
    def reshape_as(self, other): return self.reshape(tuple(other.shape))
    def expand_as(self, other): return self.expand(tuple(other.shape))

    def swapaxes(self, a, b): return self.transpose(a, b)
    swapdims = swapaxes

    def movedim(self, source, destination):
        """source dims (an int or a sequence) moved to the positions destination names, the others in order."""
        many = isinstance(source, (tuple, list))
        if many != isinstance(destination, (tuple, list)) or (many and len(source) != len(destination)):
            raise RuntimeError(f"movedim: Invalid source or destination dims: source ({source} dims) should "
                               f"contain the same number of dims as destination ({destination} dims)")
        src = [_dim(d, self.ndim, "movedim") for d in (source if many else (source,))]
        dst = [_dim(d, self.ndim, "movedim") for d in (destination if many else (destination,))]
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise RuntimeError(f"movedim: repeated dim in `source` ({list(source)}) or `destination` "
                               f"({list(destination)})")
        order = [None] * self.ndim
        for s, d in zip(src, dst):
            order[d] = s
        rest = iter(i for i in range(self.ndim) if i not in src)
        return self.permute([o if o is not None else next(rest) for o in order])

    # ---- matrix products ----------------------------------------------------------------------------------
    def mm(self, mat2):
        if not isinstance(mat2, _C.TensorBase):
            raise TypeError(f"mm: mat2 must be a Tensor, got {type(mat2).__name__}")
        if self.ndim != 2 or mat2.ndim != 2:
            raise RuntimeError(f"mm: self must be a matrix and mat2 must be a matrix, got shapes "
                               f"{tuple(self.shape)} and {tuple(mat2.shape)}")
        return matmul_tensors(self, mat2)

    def bmm(self, mat2):
        if not isinstance(mat2, _C.TensorBase):
            raise TypeError(f"bmm: mat2 must be a Tensor, got {type(mat2).__name__}")
        if self.ndim != 3 or mat2.ndim != 3:
            raise RuntimeError(f"bmm: batch1 must be a 3D tensor and batch2 must be a 3D tensor, got shapes "
                               f"{tuple(self.shape)} and {tuple(mat2.shape)}")
        if self.shape[0] != mat2.shape[0]:
            raise RuntimeError(f"bmm: batch1 and batch2 must have the same batch size, got {self.shape[0]} and "
                               f"{mat2.shape[0]}")
        return matmul_tensors(self, mat2)

    # ---- sorting: the order is found on the host (NumPy's stable sort), the values gathered on the device --------
    def argsort(self, dim=-1, descending=False, stable=False):
        """Indices that sort dim (stable always: ties keep their order; NaN sorts as the largest value, as in
        PyTorch). The ranking runs on the host: a CUDA tensor makes a round trip through host memory."""
        d = _dim(dim, self.ndim, "argsort")
        if self._device == "meta":
            return _C.empty(tuple(self.shape), 4, "meta")
        a = self.detach()
        a = _C.TensorBase.numpy((a if a._dtype != 3 else F.cast(a, 0)).cpu() if a._device != "cpu" else
                                (a if a._dtype != 3 else F.cast(a, 0)))
        a = np.moveaxis(a, d, -1) if self.ndim else a.reshape(1)
        if descending:  # a stable descending order: the ascending order of the reversed row, reversed back
            n = a.shape[-1]
            idx = (n - 1) - np.argsort(a[..., ::-1], axis=-1, kind="stable")[..., ::-1]
        else:
            idx = np.argsort(a, axis=-1, kind="stable")
        idx = np.moveaxis(idx, -1, d) if self.ndim else idx.reshape(())
        return _C.from_numpy(np.asarray(idx, order="C"), 4, self._device)

    def sort(self, dim=-1, descending=False, stable=False):
        """(values, indices) along dim; values are differentiable (gathered with take_along_dim)."""
        idx = self.argsort(dim, descending, stable)
        return _RESULT["sort"](self.take_along_dim(idx, dim, _valid=True), idx)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        """The k largest (smallest with largest=False) entries along dim and their indices, in order."""
        d = _dim(dim, self.ndim, "topk")
        size = self.shape[d] if self.ndim else 1
        k = as_int(k)
        if not isinstance(k, numbers.Integral) or not 0 <= k <= size:
            raise RuntimeError(f"selected index k out of range: k={k} for a dimension of size {size}")
        idx = self.argsort(d, descending=largest)
        idx = idx.narrow(d, 0, int(k)).contiguous() if self.ndim else idx
        return _RESULT["topk"](self.take_along_dim(idx, d, _valid=True), idx)

    def msort(self):
        return self.sort(0)[0]

    def take_along_dim(self, indices, dim=None, *, _valid=False):
        """out[..., i, ...] = self[..., indices[..., i, ...], ...] along dim; self and indices broadcast in the
        other dims (PyTorch's rule), and dim=None takes from the flattened self. Composed of differentiable flat
        indexing: rows of self and one index tensor. _valid: the indices are known to be in [0, size) (sort's,
        topk's, gather's after its check)."""
        if not isinstance(indices, _C.TensorBase) or indices._dtype != 4:
            raise TypeError("take_along_dim: indices must be an int64 tensor")
        if dim is None:
            return self.reshape(-1).take_along_dim(indices.reshape(-1), 0, _valid=_valid)
        if self.ndim == 0:
            return self.reshape(()) if indices.ndim == 0 else self.expand(tuple(indices.shape))
        d = _dim(dim, self.ndim, "take_along_dim")
        if indices.ndim != self.ndim:
            raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of "
                               f"dimensions, but got {self.ndim} dimensions for input, and {indices.ndim} "
                               f"dimensions for indices")
        if any(i != d and indices.shape[i] != self.shape[i] for i in range(self.ndim)):
            try:  # dim itself takes no part: its sizes may differ (a beam search gathering 4 of 2 rows)
                shape = list(np.broadcast_shapes(*(tuple(t.shape[:d]) + (1,) + tuple(t.shape[d + 1:])
                                                   for t in (self, indices))))
            except ValueError:
                raise RuntimeError(f"take_along_dim: indices of shape {tuple(indices.shape)} do not broadcast with "
                                   f"the input's shape {tuple(self.shape)} outside dimension {d}") from None
            self = self.expand(tuple(shape[:d] + [self.shape[d]] + shape[d + 1:]))
            indices = indices.expand(tuple(shape[:d] + [indices.shape[d]] + shape[d + 1:]))
        n = self.shape[d]
        if not _valid:
            indices = _checked_indices(indices, n, d, negative_wraps=True)
        # Each entry's flat position in the contiguous input: its index along d times d's stride, plus its
        # coordinates in the other dims times theirs. The result comes out in the indices' own (contiguous)
        # layout, as PyTorch's gather does, so that sort(0).values.view(-1) works.
        x = self.contiguous()
        strides = x.stride()
        flat = _C.binary(F.MUL, indices, strides[d]) if strides[d] != 1 else indices
        for i, s in enumerate(indices.shape):
            if i != d and s > 1:
                coord = _C.binary(F.MUL, _C.arange(0.0, float(s), 1.0, 4, self._device), strides[i])
                flat = _C.binary(F.ADD, flat, coord.reshape(tuple(s if j == i else 1 for j in range(x.ndim))))
        return take_flat(x.reshape(-1), flat.reshape(-1)).reshape(tuple(indices.shape))

    def flip(self, *dims_, dims=None):
        """A copy with the order of entries reversed along each of dims (an int, or a list or tuple of them; also
        given as dims=, PyTorch's keyword)."""
        dims = _dims_list(dims_ if dims is None else (dims,), self.ndim, "flip")
        return self._permuted_along(dims, lambda n: np.arange(n - 1, -1, -1))

    def roll(self, shifts, dims=None):
        """A copy with entries shifted by shifts along dims, wrapping around: out[i] = self[(i - shift) mod n].
        Without dims, over the flattened tensor, its shape restored."""
        shifts, dims = as_int(shifts), as_int(dims)
        if dims is None:
            if not isinstance(shifts, numbers.Integral):
                if len(shifts) != 1:
                    raise RuntimeError(f"roll: with no dims, shifts must be one int, got {shifts!r}")
                shifts = shifts[0]
            return self.reshape(-1).roll(int(shifts), 0).reshape(tuple(self.shape))
        shifts = (shifts,) if isinstance(shifts, numbers.Integral) else tuple(shifts)
        dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
        if len(shifts) != len(dims):
            raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims: {len(dims)}")
        x = self
        for shift, dim in zip(shifts, dims):
            d = _dim(dim, self.ndim, "roll")
            x = x._permuted_along([d], lambda n, k=int(shift): (np.arange(n) - k) % max(n, 1))
        return x

    def _permuted_along(self, dims, order):
        """A copy whose entries along each of dims are the ones at order(size) (index_select: differentiable,
        every device)."""
        x = self
        for d in dims:
            idx = np.asarray(order(self.shape[d]), dtype=np.int64, order="C")
            x = x.index_select(d, _C.from_numpy(idx, 4, self._device))
        return x if x is not self else self.clone()

    def gather(self, dim, index, *, sparse_grad=False):
        """out[i][j] = self[index[i][j]][j] along dim 0 (and so on): index has self's number of dims and, except
        along dim, sizes no larger than self's (PyTorch's rule); out has index's shape. An index outside
        [0, size) raises, as in PyTorch. Composed of take_along_dim over the part of self that index covers."""
        index = long_index(index)
        if not isinstance(index, _C.TensorBase) or index._dtype != 4:
            raise RuntimeError("gather(): Expected dtype int64 for index")
        d = _dim(dim, max(self.ndim, 1), "gather")
        if index.ndim == 0 and self.ndim == 1:  # a 0-d index beside a 1-d input is one index (PyTorch's)
            return self.gather(d, index.reshape(1)).reshape(())
        if index.ndim != self.ndim:
            raise RuntimeError(f"gather: index of shape {tuple(index.shape)} must have the same number of "
                               f"dimensions as input of shape {tuple(self.shape)} (index.ndim == input.ndim)")
        x = self
        for i in range(self.ndim):
            if i != d and index.shape[i] > self.shape[i]:
                raise RuntimeError(f"gather: size does not match at dimension {i}: expected index "
                                   f"{tuple(index.shape)} to be no larger than input {tuple(self.shape)} apart "
                                   f"from dimension {d}")
            if i != d and index.shape[i] < self.shape[i]:
                x = x.narrow(i, 0, index.shape[i])
        if self.ndim:
            _checked_indices(index, self.shape[d], d, negative_wraps=False)
        return x.take_along_dim(index, d, _valid=True)

    # ---- new_* constructors: this tensor's dtype and device unless given -------------------------------------
    def _new(self, op, size, value, dtype, device, requires_grad, layout, pin_memory):
        if layout is not None and not hasattr(layout, "name"):  # gm.strided (tensor_misc_extra.layout)
            raise TypeError(f"{op}(): argument 'layout' must be torch.layout, not {type(layout).__name__}")
        if layout is not None and layout.name != "strided":
            raise NotImplementedError(f"{op}(): layout={layout} is not supported: gpumemnet has dense (strided) "
                                      f"tensors only")
        code = (self.dtype if dtype is None else as_dtype(dtype)).code
        dev = self._device if device is None else device_str(device)
        t = _C.empty(_size_arg(size), code, dev, bool(pin_memory))
        if value is not None:
            _C.fill_(t, fitting(value, code))
        if requires_grad:
            t.requires_grad = True
        return t

    # size= is PyTorch's keyword for the sizes (x.new_zeros(size=(2,))), also accepted as *sizes; layout= and
    # pin_memory= as PyTorch's factories take them (fastai passes both)
    def new_zeros(self, *sizes, size=None, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False):
        return self._new("new_zeros", sizes if size is None else (size,), 0, dtype, device, requires_grad, layout,
                         pin_memory)

    def new_ones(self, *sizes, size=None, dtype=None, layout=None, device=None, pin_memory=False,
                 requires_grad=False):
        return self._new("new_ones", sizes if size is None else (size,), 1, dtype, device, requires_grad, layout,
                         pin_memory)

    def new_empty(self, *sizes, size=None, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False):
        return self._new("new_empty", sizes if size is None else (size,), None, dtype, device, requires_grad, layout,
                         pin_memory)

    def new_full(self, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False,
                 requires_grad=False):
        return self._new("new_full", (size,), fill_value, dtype, device, requires_grad, layout, pin_memory)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A copy of data with this tensor's dtype and device by default (PyTorch's rule, unlike tensor())."""
        dev = self._device if device is None else device_str(device)
        code = (self.dtype if dtype is None else as_dtype(dtype)).code
        if isinstance(data, _C.TensorBase):
            out = data.detach().to(dtype=DTYPES[code], device=dev, copy=True)
        else:
            out = _C.from_numpy(np.asarray(data), code, dev)
        if requires_grad:
            out.requires_grad = True
        return out

    # ---- logical tests -------------------------------------------------------------------------------------
    def isnan(self):
        return self != self if self._dtype in _FLOAT_CODES else _C.binary(F.NE, self, self)

    def isinf(self):
        if self._dtype not in _FLOAT_CODES:
            return _C.binary(F.NE, self, self)  # all False, a new bool tensor
        return _C.binary(F.EQ, _C.unary(F.ABS, self), math.inf)

    def isfinite(self):
        if self._dtype not in _FLOAT_CODES:
            return _C.binary(F.EQ, self, self)
        # x - x is 0 exactly for finite x and NaN for +-inf and NaN
        return _C.binary(F.EQ, _C.binary(F.SUB, self, self), 0.0)

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """|self - other| <= atol + rtol * |other| where that difference is finite, elementwise (PyTorch's
        test); equal values (infinities too) are close; NaNs are close to each other only with equal_nan."""
        a, b = self.detach(), other.detach() if isinstance(other, _C.TensorBase) else other
        if isinstance(b, _C.TensorBase) and a._dtype != b._dtype:
            raise RuntimeError(f"isclose: {self.dtype} did not match {other.dtype}")
        eq = _C.binary(F.EQ, a, b)
        diff = _C.unary(F.ABS, _C.binary(F.SUB, a, b))
        bound = _C.binary(F.ADD, _C.binary(F.MUL, _C.unary(F.ABS, b) if isinstance(b, _C.TensorBase)
                                            else abs(b), rtol), atol)
        within = _C.binary(F.MINIMUM, _C.binary(F.LE, diff, bound), _C.binary(F.LT, diff, math.inf))
        close = _C.binary(F.MAXIMUM, eq, within)
        if equal_nan:
            both = _C.binary(F.MINIMUM, _C.binary(F.NE, a, a), _C.binary(F.NE, b, b))
            close = _C.binary(F.MAXIMUM, close, both)
        return close

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def equal(self, other):
        if not isinstance(other, _C.TensorBase):
            raise TypeError(f"equal(): argument 'other' must be Tensor, not {type(other).__name__}")
        return tuple(self.shape) == tuple(other.shape) and bool((self.detach() == other.detach()).all())

    def all(self, dim=None, keepdim=False):
        """Whether every entry (along dim) is nonzero, as a bool tensor (uint8 for a uint8 input, as PyTorch's)."""
        zero = _C.binary(F.EQ, self.detach(), 0)
        out = _C.binary(F.EQ, _C.reduce(F.SUM, zero, _dims_arg(dim, self.ndim, "all"), keepdim), 0)
        return out if self._dtype != _UINT8 else F.cast(out, _UINT8)

    def any(self, dim=None, keepdim=False):
        nonzero = _C.binary(F.NE, self.detach(), 0)
        out = _C.binary(F.GT, _C.reduce(F.SUM, nonzero, _dims_arg(dim, self.ndim, "any"), keepdim), 0)
        return out if self._dtype != _UINT8 else F.cast(out, _UINT8)

    def logical_and(self, other): return _C.binary(F.MINIMUM, _as_bool(self), _as_bool(other))
    def logical_or(self, other): return _C.binary(F.MAXIMUM, _as_bool(self), _as_bool(other))
    def logical_xor(self, other): return _C.binary(F.NE, _as_bool(self), _as_bool(other))

    def masked_fill(self, mask, value):
        """self where mask is False, value where it is True; self and mask broadcast (a (B, 1, 1, T) padding mask
        with a (1, 1, T, T) causal one), and the result keeps self's dtype."""
        if not isinstance(mask, _C.TensorBase) or mask._dtype != _BOOL:
            raise _C.ArgumentTypeError(f"masked_fill: mask must be a bool tensor, got "
                            f"{mask.dtype if isinstance(mask, _C.TensorBase) else type(mask).__name__}")
        if isinstance(value, _C.TensorBase):
            if value.ndim != 0:
                raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                                   f"{value.ndim} dimension(s).")
            value = value.to(self.dtype)
        fitting(value, self._dtype)  # -1e9 into a float16 tensor: PyTorch's overflow error, not -inf
        out = _where(mask, value, self)
        return out if out._dtype == self._dtype else out.to(self.dtype)

    def masked_fill_(self, mask, value):
        """In place; on a tensor in a graph it is recorded (the gradient is g where mask is False, 0 where it is
        True: no old value is needed), and a node that saved the old value raises at backward (version check)."""
        # a 0-d value in the graph (its gradient is the sum of g over the filled entries), or a view of a tensor in
        # one (the write recorded on its base)
        if _needs_grad(value) or (self.requires_grad and self._graph_view):
            if write_recorded(self, "masked_fill_", (value,), lambda x: x.masked_fill(mask, value)):
                return self
        filled = self.detach().masked_fill(mask, value.detach() if isinstance(value, _C.TensorBase) else value)
        if tuple(filled.shape) != tuple(self.shape):
            raise RuntimeError(f"masked_fill_: mask of shape {tuple(mask.shape)} does not broadcast to the "
                               f"tensor's shape {tuple(self.shape)}")
        if _check_inplace(self, "masked_fill_"):
            return _InplaceMaskedFill.apply(self, mask, filled)
        _C.copy_(self, filled)
        return self

    def where(self, condition, other):
        return _where(F.bool_condition(condition), self, other)

    # ---- reductions composed of others --------------------------------------------------------------------
    def prod(self, dim=None, keepdim=False, dtype=None):
        x = self if dtype is None else self.to(dtype)
        x = _amp.fp32(x)[0] if _amp._state.enabled else x  # (on both of PyTorch's autocast float32 lists)
        d = _dims_arg(dim, x.ndim, "prod")
        out = _Prod.apply(x, d, keepdim) if _needs_grad(x) else _C.reduce(F.PROD, x, d, keepdim)
        return out if dtype is None or out._dtype == x._dtype else out.to(dtype)  # (integers multiply in int64)

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        """The vector p-norm over dim (all entries by default): 'fro' and 2 are the Euclidean norm."""
        x = self if dtype is None else self.to(dtype)
        if x._dtype not in _FLOAT_CODES:
            raise RuntimeError(f"norm(): input dtype should be floating point, got {x.dtype}")
        if x._dtype in (2, 3) and p not in (math.inf, -math.inf, 0):
            # float16 / bfloat16: PyTorch sums the powers in float32 and rounds once (300 squared is inf in float16)
            return x.float().norm(p, dim, keepdim).to(x.dtype)
        if p == "nuc":  # the sum of the singular values of the matrices over dim (both dims of a 2-D input)
            if dim is not None and (not isinstance(dim, (tuple, list)) or len(dim) != 2):
                raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
            from .tensor_decomp import nuclear_norm  # noqa: E402  (tensor_decomp's mixin is copied after this one)
            return nuclear_norm(x, tuple(range(x.ndim)) if dim is None else dim, keepdim)
        if p in ("fro", 2, 2.0):
            s = (x * x).sum(dim, keepdim)
            if not _needs_grad(s):
                return s.sqrt()
            # PyTorch's gradient of a zero vector's norm is 0: sqrt's own at 0 (inf x 0) would be NaN. The square
            # root reads 1 there instead, and where() sends its gradient nowhere.
            zero = s == 0
            return _where(zero, 0.0, _where(zero, 1.0, s).sqrt())
        if p in (math.inf, float("inf")):
            return x.abs().amax(dim, keepdim)
        if p in (-math.inf, float("-inf")):
            return x.abs().amin(dim, keepdim)
        if p == 1:
            return x.abs().sum(dim, keepdim)
        if p == 0:  # the count of nonzero entries; in a graph with a zero gradient, as PyTorch's (backward runs)
            count = (x != 0).sum(dim, keepdim).to(x.dtype)
            if not _needs_grad(x):
                return count
            return count + (_where(x.isfinite(), x, 0.0) * 0.0).sum(dim, keepdim)  # (0 beside inf and NaN too)
        if isinstance(p, numbers.Real):
            a = x.abs()
            if not _needs_grad(a):
                return (a ** p).sum(dim, keepdim) ** (1.0 / p)
            # the powers and the root taken only where positive: at a zero entry (p < 1) and at a zero vector the
            # gradient is PyTorch's 0, not an infinite slope times 0 (cdist(p=3) of a query equal to a support point)
            nz = a != 0  # (NaN entries too: they make the norm NaN, as PyTorch's)
            s = (_where(nz, _where(nz, a, 1.0) ** p, 0.0) if p < 1 else a ** p).sum(dim, keepdim)
            pos = s != 0
            out = _where(pos, _where(pos, s, 1.0) ** (1.0 / p), 0.0)
            # p < 0: a zero entry's |0|^p is inf, so the norm is 0 (gradient 0), as without grad
            return _where((a == 0).to(a.dtype).amax(dim, keepdim) > 0, 0.0, out) if p < 0 else out
        raise ValueError(f"norm: p must be a number or 'fro', got {p!r}")

    # ---- memory formats: gpumemnet keeps NCHW ----------------------------------------------------------
    def is_contiguous(self, memory_format=None):
        """Whether the tensor is laid out densely in row-major order. gpumemnet keeps every tensor NCHW (see
        gpumemnet.channels_last), so memory_format=channels_last asks whether the strides also fit that layout
        (PyTorch's answer): only when the channel dim or the pixels are trivial (C == 1 or H * W == 1)."""
        if memory_format is None or memory_format is _contiguous_format():
            return self._is_contiguous()
        fmt = _check_format(memory_format, "is_contiguous")
        if fmt.name == "preserve_format":
            raise RuntimeError("is_contiguous: preserve memory format is unsupported by the contiguous operator")
        if self.ndim != fmt.ndim:
            return False
        order = [0] + list(range(2, self.ndim)) + [1]  # N, (D,) H, W, C: the innermost dim last
        expected, stride = {}, 1
        for d in reversed(order):
            expected[d] = stride
            stride *= self.shape[d]
        return all(self.shape[d] == 1 or self._strides[d] == expected[d] for d in range(self.ndim))

    def contiguous(self, memory_format=None):
        """self when it is contiguous, else a contiguous copy. With channels_last: a copy where PyTorch makes one,
        laid out NCHW (gpumemnet keeps NCHW: gpumemnet.channels_last says why; _core/dtype.py's format_copy)."""
        if memory_format is not None:
            fmt = _check_format(memory_format, "contiguous")
            if fmt.name == "preserve_format":
                raise RuntimeError("contiguous: preserve memory format is unsupported by the contiguous operator")
            return format_copy(self, fmt)
        return self if self._is_contiguous() else self.clone()

    # ---- formatting -------------------------------------------------------------------------------------------
    def __format__(self, spec):
        """f"{loss:.4f}" formats a 0-d tensor's value, as PyTorch does; anything else formats as repr."""
        if self.ndim == 0 and self._device != "meta":
            return self.item().__format__(spec)
        return object.__format__(self, spec)


class _InplaceMaskedFill(Function):
    """a.masked_fill_(mask, v) for `a` in a graph: the node's output is `a` itself (edges taken before the write)."""

    @staticmethod
    def forward(ctx, a, mask, filled):
        ctx.save_for_backward(mask)
        _C.copy_(a, filled)  # bumps a's version
        return a

    @staticmethod
    def backward(ctx, g):
        mask, = ctx._unpacked
        return _C.where(mask, 0.0, g), None, None


class _Prod(Function):
    """prod over dims. d(prod)/dx_i is the product of the others: out / x_i without zeros; where a slice has
    one zero, that entry gets the product of the nonzero others and the rest 0; two or more zeros give 0."""

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        out = _C.reduce(F.PROD, x, dims, keepdim)
        ctx.save_for_backward(x, out)
        ctx.dims, ctx.keepdim = dims, keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx._unpacked
        dims = F._norm_dims(ctx.dims, x.ndim)
        g = F._unreduce(g, x.shape, dims, ctx.keepdim)
        out = F._unreduce(out, x.shape, dims, ctx.keepdim)
        zero = _C.binary(F.EQ, x, 0.0)
        nzero = F._unreduce(_C.reduce(F.SUM, zero, ctx.dims, ctx.keepdim), x.shape, dims, ctx.keepdim)
        others = F._unreduce(_C.reduce(F.PROD, _C.where(zero, 1.0, x), ctx.dims, ctx.keepdim), x.shape, dims,
                             ctx.keepdim)
        plain = _C.binary(F.DIV, out, _C.where(zero, 1.0, x))
        one_zero = _C.where(zero, others, 0.0)
        d = _C.where(_C.binary(F.EQ, nzero, 0), plain, _C.where(_C.binary(F.EQ, nzero, 1), one_zero, 0.0))
        return F.cast(_C.binary(F.MUL, g, d), x._dtype), None, None


def _dims_list(dims, ndim, op):
    """dims given as ints, or as one list or tuple of them: normalised, each once (PyTorch's check)."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    out = [_dim(d, ndim, op) for d in dims]
    for d in out:
        if out.count(d) > 1:
            raise RuntimeError(f"{op}: dim {d} appears multiple times in the list of dims")
    return out


def long_index(index):
    """An int32 index tensor as int64, which the index ops read (PyTorch takes int32 indices: NumPy's and pandas'
    codes); anything else as it is."""
    return index.long() if isinstance(index, _C.TensorBase) and index._dtype == _I32 else index


def no_negative(index, n, d, op):
    """PyTorch's index_select, index_add, index_copy and embedding refuse a negative index (-1 is a common "none"
    marker: it must not silently pick the last row, as a Python index would); gm's C gather wraps them."""
    if index._device != "meta" and index.numel() and bool((index < 0).any()):
        bad = int(index.detach().min())
        raise IndexError(f"index out of range in self ({op}: index {bad} is negative; dimension {d} has size {n})")


def _checked_indices(indices, n, d, negative_wraps):
    """indices along a dim of size n, checked: RuntimeError naming the first outside [0, n) (outside [-n, n) where
    negative ones wrap, as take_along_dim's do in PyTorch; gather's do not). Negative ones wrapped."""
    if indices._device == "meta":  # no values to check: an estimate's meta run takes them as valid
        return indices
    low = -n if negative_wraps else 0
    if indices.numel() and bool(((indices < low) | (indices >= n)).any()):
        v = indices.detach().cpu().numpy().reshape(-1)
        bad = v[(v < low) | (v >= n)][0]
        raise RuntimeError(f"index {int(bad)} is out of bounds for dimension {d} with size {n}")
    if negative_wraps and indices.numel() and bool((indices < 0).any()):
        indices = _where(indices < 0, indices + n, indices)
    return indices


def _where(cond, a, b):
    if _needs_grad(a, b):
        return F.Where.apply(cond, a, b)
    return _C.where(cond, a, b)


def _as_tensor_like(x, like):
    return x if isinstance(x, _C.TensorBase) else _C.from_numpy(np.asarray(x), like._dtype, like._device)


def _as_bool(x):
    if isinstance(x, _C.TensorBase):
        return x if x._dtype == _BOOL else _C.binary(F.NE, x, 0)
    return bool(x)


def _size_arg(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _contiguous_format():
    return memory_format.contiguous_format


def _check_format(fmt, op):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{op}: memory_format must be a gpumemnet memory format (gpumemnet.channels_last, ...), "
                        f"got {fmt!r}")
    return fmt
