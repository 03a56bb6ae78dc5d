"""torch.sparse, as graph networks written from scratch use it (Kipf's pygcn: an adjacency matrix built with
torch.sparse.FloatTensor or torch.sparse_coo_tensor, multiplied by features with torch.spmm / torch.sparse.mm).

A SparseTensor is a COO matrix: int64 indices (ndim, nnz) and a dense values tensor (nnz,). Its products are
made of recorded dense ops (rows gathered with index_select, scaled by the values, summed into the result with
index_add), so autograd reaches the dense operand and the values; the memory is that of the nnz gathered rows.
Like complex tensors it is not a gm.Tensor: an op without a sparse form raises TypeError naming what exists, and
to_dense() gives a dense tensor for anything else."""
import numpy as np

from . import _C
from ._core import creation as _c
from ._core.dtype import as_dtype, int64
from ._core.complex import UnsupportedAttributeError
from ._core.size import Size
from ._core.tensor import Tensor as _Tensor
from ._core.tensor_misc_extra import layout

__all__ = ["mm", "addmm", "sum", "softmax", "log_softmax", "FloatTensor", "DoubleTensor"]


sparse_coo = layout("sparse_coo")
# PyTorch's compressed layouts: the objects exist (code compares a tensor's layout with them: PyTorch Geometric's
# `layout == torch.sparse_csr`); no gpumemnet tensor has one of them.
sparse_csr, sparse_csc, sparse_bsr, sparse_bsc = (layout(n) for n in ("sparse_csr", "sparse_csc", "sparse_bsr",
                                                                       "sparse_bsc"))


class SparseTensor:
    __slots__ = ("_i", "_v", "_size", "_coalesced", "__weakref__")
    _tensor_like = True  # torch.mm(adj, x), torch.matmul ... call the methods (creation.tensor_like_has)
    is_sparse = True
    layout = sparse_coo

    def __init__(self, indices, values, size, coalesced=False):
        self._i, self._v, self._size, self._coalesced = indices, values, Size(size), coalesced

    shape = property(lambda self: self._size)
    dtype = property(lambda self: self._v.dtype)
    device = property(lambda self: self._v.device)
    is_cuda = property(lambda self: self._v.is_cuda)
    ndim = property(lambda self: len(self._size))
    requires_grad = property(lambda self: self._v.requires_grad)

    def size(self, dim=None):
        return self._size if dim is None else self._size[dim]

    def dim(self):
        return self.ndim

    def numel(self):
        n = 1
        for s in self._size:
            n *= s
        return n

    def ndimension(self):
        return self.ndim

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """No dtype: the legacy type name ('torch.sparse.FloatTensor'); with one (a dtype or such a name): the
        tensor converted to it, as PyTorch's."""
        names = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}
        if dtype is None:
            kind = names.get(str(self._v.dtype).split(".")[-1], str(self._v.dtype).split(".")[-1])
            return f"torch.{'cuda.' if self.is_cuda else ''}sparse.{kind}Tensor"
        if isinstance(dtype, str):
            wanted = dtype.split(".")[-1]
            found = [k for k, v in names.items() if f"{v}Tensor" == wanted]
            if ".sparse." not in dtype or not found:
                raise ValueError(f"type(): invalid sparse type {dtype!r}")
            dtype = as_dtype(found[0])
        return self.to(dtype=dtype, non_blocking=non_blocking)

    def sparse_dim(self):
        return self._i.shape[0]

    def dense_dim(self):
        return 0

    def _nnz(self):
        return self._i.shape[1]

    def indices(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._i

    def values(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._v

    def _indices(self):
        return self._i

    def _values(self):
        return self._v

    def is_coalesced(self):
        return self._coalesced

    def coalesce(self):
        """Sorted unique indices, the values of repeated ones summed (recorded: gradients reach the values)."""
        if self._coalesced:
            return self
        flat = self._linear()
        uniq, inverse = np.unique(flat.cpu().numpy(), return_inverse=True)
        inv = _c.tensor(inverse.astype(np.int64), device=self._v.device)
        values = _c.zeros(len(uniq), dtype=self._v.dtype, device=self._v.device).index_add(0, inv, self._v)
        idx = np.stack(np.unravel_index(uniq, tuple(self._size)))
        return SparseTensor(_c.tensor(idx.astype(np.int64), device=self._i.device), values, self._size, True)

    def _linear(self):
        """Each entry's index into the flattened dense tensor."""
        flat = self._i[0].clone()
        for d in range(1, self._i.shape[0]):
            flat = flat * self._size[d] + self._i[d]
        return flat

    def to_dense(self):
        n = int(np.prod(self._size))
        out = _c.zeros(n, dtype=self._v.dtype, device=self._v.device).index_add(0, self._linear(), self._v)
        return out.view(tuple(self._size))

    def t(self):
        if self.ndim != 2:
            raise RuntimeError(f"t() expects a 2-D sparse tensor, got {self.ndim}-D")
        return SparseTensor(self._i.flip(0), self._v, (self._size[1], self._size[0]))

    def transpose(self, d0, d1):
        if sorted((d0 % self.ndim, d1 % self.ndim)) != [0, 1] or self.ndim != 2:
            raise RuntimeError("transpose of a sparse tensor: only the two dims of a 2-D one")
        return self.t()

    # a 2-D sparse tensor's transposes (real values: the conjugate ones are the same); linear_operator's
    # interpolation takes left_interp_t.mT
    T = mT = H = mH = property(t)

    def to(self, *args, **kwargs):
        v = self._v.to(*args, **kwargs)
        i = self._i.to(device=v.device)
        return SparseTensor(i, v, self._size, self._coalesced)

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda" if device is None else device, non_blocking=non_blocking)

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(dtype=as_dtype("float32"))

    def double(self):
        return self.to(dtype=as_dtype("float64"))

    def detach(self):
        return SparseTensor(self._i, self._v.detach(), self._size, self._coalesced)

    def requires_grad_(self, flag=True):
        if flag and not self._v.requires_grad:  # a leaf of its own over the values' memory, as sparse_coo_tensor's
            self._v = self._v.detach().requires_grad_(True)  # requires_grad=True: the user's tensor stays as it was
        elif not flag:
            self._v.requires_grad_(False)
        return self

    def mul(self, other):
        if isinstance(other, (int, float)) or (isinstance(other, _C.TensorBase) and other.ndim == 0):
            return SparseTensor(self._i, self._v * other, self._size, self._coalesced)
        raise TypeError("sparse * : only a number or a 0-d tensor multiplies a sparse tensor here; to_dense() first")

    __mul__ = __rmul__ = mul

    def __truediv__(self, other):
        return self.mul(1.0 / other)

    def add(self, other, *, alpha=1):
        """sparse + sparse: the entries of both, summed where both are coalesced (PyTorch's result is coalesced then,
        and its indices() / values() work). sparse + dense is refused, as
        PyTorch refuses it; dense + sparse (__radd__) is dense: pytorch/examples' gcn adds the identity to its
        adjacency, torch.eye(n) + adj."""
        other = other if alpha == 1 else other * alpha
        if not isinstance(other, SparseTensor):
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        if tuple(other._size) != tuple(self._size):
            raise RuntimeError(f"add: sparse tensors of sizes {tuple(self._size)} and {tuple(other._size)}")
        out = SparseTensor(_c.cat([self._i, other._i], 1), _c.cat([self._v, other._v]), self._size)
        return out.coalesce() if self._coalesced and other._coalesced else out

    __add__ = add

    def sub(self, other, *, alpha=1):
        return self.add(-other if alpha == 1 else other * -alpha)

    __sub__ = sub

    def __radd__(self, other):
        return other + self.to_dense()

    def __rsub__(self, other):
        return other - self.to_dense()

    def __neg__(self):
        return self.mul(-1.0)

    def mm(self, mat2):
        return mm(self, mat2)

    matmul = spmm = mm

    def __matmul__(self, other):
        return mm(self, other)

    def __rmatmul__(self, other):
        # dense @ sparse = (sparse^T @ dense^T)^T
        return mm(self.t(), other.t()).t()

    def sum(self, dim=None, keepdim=False):
        return sum(self, dim)

    def __repr__(self):
        return (f"tensor(indices={self._i!r},\n       values={self._v!r},\n       size={tuple(self._size)}, "
                f"nnz={self._nnz()}, layout=torch.sparse_coo)")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedAttributeError(f"sparse tensors in gpumemnet have no '{name}'; they support "
                        f"{', '.join(sorted(n for n in vars(SparseTensor) if not n.startswith('__')))} "
                        f"(to_dense() gives a dense tensor for anything else)")


def to_sparse(t, sparse_dim=None, *, layout=None):
    """Tensor.to_sparse(): the nonzero entries of a dense tensor as a COO sparse tensor (sparse in every dim)."""
    if sparse_dim is not None and not 0 <= sparse_dim <= t.ndim:
        raise RuntimeError(f"dense_to_sparse: sparse_dim argument must be in [0,{t.ndim}] range, but {sparse_dim} is "
                           f"given")
    if sparse_dim not in (None, t.ndim) or layout not in (None, sparse_coo):
        raise NotImplementedError("to_sparse: only the COO layout sparse in every dim (values with dense dims, "
                                  "and the compressed layouts, are not supported)")
    indices = t.nonzero().t()
    return SparseTensor(indices, t[tuple(indices)], tuple(t.shape), True)


def sparse_coo_tensor(indices, values, size=None, dtype=None, device=None, requires_grad=False,
                      check_invariants=None, is_coalesced=None):
    """A COO sparse tensor of int64 indices (ndim, nnz) and values (nnz,). Indices of another dtype (int32 ...) are
    converted to int64, as PyTorch does."""
    indices = indices if isinstance(indices, _C.TensorBase) else _c.tensor(np.asarray(indices), dtype=int64)
    values = values if isinstance(values, _C.TensorBase) else _c.tensor(values, dtype=dtype)
    if indices.dtype != int64:
        indices = indices.to(dtype=int64)
    if indices.ndim != 2 or values.ndim != 1 or indices.shape[1] != values.shape[0]:
        raise ValueError(f"sparse_coo_tensor: expected indices of shape (ndim, nnz) and values of shape (nnz,) "
                         f"(values with dense dims are not supported), got {tuple(indices.shape)} and "
                         f"{tuple(values.shape)}")
    if dtype is not None:
        values = values.to(dtype=dtype)
    if device is not None:
        values, indices = values.to(device=device), indices.to(device=device)
    elif indices.device != values.device:
        indices = indices.to(device=values.device)
    if size is None:
        size = [int(m) + 1 for m in indices.max(1).values.tolist()] if indices.shape[1] else [0] * indices.shape[0]
    size = tuple(int(s) for s in size)
    if len(size) != indices.shape[0]:
        raise ValueError(f"sparse_coo_tensor: number of dimensions in size {size} must equal the rows of indices "
                         f"({indices.shape[0]}): dense dims are not supported")
    if indices.shape[1] and indices.device.type != "meta":
        high = indices.max(1).values.tolist()
        low = indices.min(1).values.tolist()
        for d, (lo, hi) in enumerate(zip(low, high)):
            if lo < 0 or hi >= size[d]:
                raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {size[d]} but found "
                                   f"index {hi if hi >= size[d] else lo}")
    if requires_grad:
        values = values.detach().requires_grad_(True)
    return SparseTensor(indices, values, size, bool(is_coalesced))


def _legacy(dtype):
    def make(indices, values, size=None):
        # values that are a tensor keep their dtype (PyTorch's legacy constructors do); a list takes the type's
        keep = isinstance(values, _C.TensorBase)
        return sparse_coo_tensor(indices, values, size, dtype=None if keep else as_dtype(dtype))
    make.__name__ = f"{'Float' if dtype == 'float32' else 'Double'}Tensor"
    make.__doc__ = f"torch.sparse.{make.__name__}(indices, values, size): the legacy constructor pygcn uses."
    return make


FloatTensor = _legacy("float32")
DoubleTensor = _legacy("float64")


def mm(mat1, mat2):
    """sparse (n, m) @ dense (m, k) -> dense (n, k): out[row] += value * mat2[col] over the entries."""
    if not isinstance(mat1, SparseTensor):
        if isinstance(mat1, _C.TensorBase) and isinstance(mat2, _C.TensorBase):
            return mat1.mm(mat2)
        raise TypeError(f"sparse.mm: mat1 must be a sparse or dense Tensor, got {type(mat1).__name__}")
    if not isinstance(mat2, _C.TensorBase):
        raise TypeError(f"sparse.mm: mat2 must be a dense Tensor, got {type(mat2).__name__}")
    if mat1.ndim != 2 or mat2.ndim not in (1, 2) or mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"sparse.mm: mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} "
                           f"and {'x'.join(str(s) for s in mat2.shape)})")
    if mat2.dtype != mat1.dtype:
        raise RuntimeError(f"sparse.mm: expected mat1 and mat2 of one dtype, got {mat1.dtype} and {mat2.dtype}")
    vec = mat2.ndim == 1
    dense = mat2.unsqueeze(1) if vec else mat2
    rows = dense.index_select(0, mat1._i[1]) * mat1._v.unsqueeze(1)
    out = _c.zeros(mat1.shape[0], dense.shape[1], dtype=dense.dtype, device=dense.device).index_add(0, mat1._i[0],
                                                                                                    rows)
    return out.squeeze(1) if vec else out


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    return input * beta + mm(mat1, mat2) * alpha


def sum(input, dim=None):
    """The sum of a sparse tensor's entries (dim=None: a 0-d tensor), or its dense sums along dims."""
    if not isinstance(input, SparseTensor):
        raise TypeError(f"sparse.sum: input must be a sparse tensor, got {type(input).__name__}")
    if dim is None:
        return input._v.sum()
    return input.to_dense().sum(dim)


def softmax(input, dim, dtype=None):
    raise NotImplementedError("torch.sparse.softmax is not in gpumemnet yet: use to_dense() with a mask")


log_softmax = softmax



_Tensor.to_sparse = to_sparse
_Tensor.to_sparse_coo = lambda self: to_sparse(self)
_Tensor.to_dense = lambda self, dtype=None, *, masked_grad=None: self if dtype is None else self.to(dtype)
