"""PyTorch's products and matrix helpers: addmm / addmv / addr / baddbmm / addbmm (and their in-place forms), mv,
inner, vdot, kron, tensordot, chain_matmul, cross, block_diag, cartesian_prod, combinations, diag_embed, diagflat,
linalg.vander. Tensor methods in ProductMethods (copied into Tensor); the gm.* functions in __all__
(gpumemnet/__init__.py imports them). cov, corrcoef and the trapezoid rules are in tensor_stats.py; det,
inverse, matrix_power, matrix_exp and the Cholesky helpers in tensor_solve.py.

Each is composed of existing ops (matmul, elementwise arithmetic, cat, where), so it is differentiable, runs on
every device and is priced on meta. The add*mm family follows PyTorch's rules: beta * input + alpha * product,
input broadcast to the product's shape (never the other way), all operands of one dtype, and beta = 0 ignores
input's values (a NaN in input does not reach the result; its gradient is zero). The in-place forms are a recorded
mul_ and add_, so they work in a graph where PyTorch's do."""
import functools
import itertools
import math
import numbers
import warnings

import numpy as np

from .. import _C
from . import autocast as _amp
from . import functions as F
from .dtype import DTYPES, get_default_dtype
from .autograd import needs_grad as _needs_grad, refuse_inplace as _refuse_inplace
from .state import warn_once
from .tensor_compose import _DiagEmbed, _diag_embed
from .tensor_methods import _dim
from .tensor_solve import (SolveMethods, cholesky_inverse, cholesky_solve, det, inverse, logdet, matrix_exp,
                           matrix_power, slogdet)
from .tensor_stats import StatsMethods, corrcoef, cov, cumulative_trapezoid, trapezoid, trapz

__all__ = ["addmm", "addmv", "addmv_", "addr", "baddbmm", "addbmm", "mv", "inner", "vdot", "kron", "chain_matmul",
           "cross", "block_diag", "cartesian_prod", "combinations", "diag_embed", "diagflat", "cov", "corrcoef",
           "trapezoid", "trapz", "cumulative_trapezoid", "matrix_power", "det", "slogdet", "logdet", "inverse",
           "tensordot", "matrix_exp", "cholesky_solve", "cholesky_inverse"]

_I64, _BOOL = 4, 5
_FLOAT_CODES = (0, 1, 2, 3)


def _dt(t):
    """t's dtype as PyTorch's messages name it (float32, not gpumemnet.float32)."""
    return str(t.dtype).rsplit(".", 1)[-1]


# ---- helpers ------------------------------------------------------------------------------------------------
def _need_tensor(x, op, arg):
    if not isinstance(x, _C.TensorBase):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _need_ndim(x, n, op, arg):
    if x.ndim != n:
        raise RuntimeError(f"{op}: {arg} must be a {n}-D tensor, got a {x.ndim}-D tensor of shape {tuple(x.shape)}")


def _same_dtype(op, **tensors):
    if len({t._dtype for t in tensors.values()}) > 1:
        got = ", ".join(f"{k} {_dt(v)}" for k, v in tensors.items())
        raise RuntimeError(f"{op}: all tensors must have the same dtype, got {got}")


def _cat(tensors, d):
    return F.Cat.apply(d, *tensors) if _needs_grad(*tensors) else _C.cat(list(tensors), d)


def _zeros(shape, code, dev):
    out = _C.empty(tuple(shape), code, dev)
    _C.fill_(out, 0)
    return out


def expands_to(shape, target):
    """Whether a tensor of `shape` broadcasts to `target` without target growing (PyTorch's expand)."""
    if len(shape) > len(target):
        return False
    return all(s == 1 or s == t for s, t in zip(reversed(shape), reversed(target)))


def _coef(x, code, op, name):
    """beta / alpha as the op uses it: a number; for integer tensors truncated to an int, as PyTorch does."""
    if not isinstance(x, numbers.Number) or isinstance(x, complex):
        raise TypeError(f"{op}(): argument '{name}' must be Number, not {type(x).__name__}")
    if code not in _FLOAT_CODES and code != _BOOL:
        return int(x)
    return x


def _zero_with_grad(t):
    """Zeros in t's shape and dtype whose gradient to t is zero (not None): beta = 0's term, NaN-free."""
    yes = _C.from_numpy(np.ones((), bool), _BOOL, t._device)
    return F.Where.apply(yes, 0, t)


def _combine(input, prod, beta, alpha, op, inplace=False):
    """beta * input + alpha * prod, input expanded to prod's shape; beta = 0 ignores input's values. inplace: the
    result written into input as a recorded mul_ and add_ (so it works in a graph, as PyTorch's does)."""
    if not expands_to(tuple(input.shape), tuple(prod.shape)):
        raise RuntimeError(f"{op}: input of shape {tuple(input.shape)} cannot be broadcast to the result's shape "
                           f"{tuple(prod.shape)}")
    out = prod if alpha == 1 else prod * alpha
    if inplace:
        if tuple(input.shape) != tuple(prod.shape):
            raise RuntimeError(f"{op}: Bad in-place call: input tensor size {list(input.shape)} and output tensor "
                               f"size {list(prod.shape)} should match")
        if out._dtype != input._dtype:
            raise RuntimeError(f"{op}: result type {_dt(out)} can't be cast to the desired output type "
                               f"{_dt(input)}")
        if beta == 0:
            if _needs_grad(input):
                input.mul_(0)  # recorded: input's old values get a zero gradient
            else:
                _refuse_inplace(input, op)
            _C.fill_(input, 0)  # then drop the NaN and inf that a product by 0 keeps
        elif beta != 1:
            input.mul_(beta)
        return input.add_(out)
    if beta == 0:
        return out + _zero_with_grad(input) if _needs_grad(input) else out
    return (input if beta == 1 else input * beta) + out


def _combine_product(input, a, b, beta, alpha, op, inplace):
    """beta * input + alpha * (a @ b). In float16 / bfloat16 it is computed in float32 and rounded once, as
    PyTorch's GEMM accumulates and scales in float32 (rounding the product first differed from it in a quarter of
    the elements: GPT-2's Conv1D under bf16)."""
    if input._dtype in (2, 3) and a._dtype == b._dtype == input._dtype:
        # (_matmul: under autocast a float32 matmul would be lowered again, the product rounded first)
        out = _combine(input.float(), _matmul(a.float(), b.float()), beta, alpha, op).to(input.dtype)
        return input.copy_(out) if inplace else out
    return _combine(input, a.matmul(b), beta, alpha, op, inplace)


def _matmul(a, b):
    """a @ b as the tensors are: no autocast lowering (for the ops PyTorch does not lower on the CPU)."""
    return F.Matmul.apply(a, b) if _needs_grad(a, b) else _C.matmul(a, b)


def _lower_on_cuda(*tensors):
    """addmv, addr and mv are on autocast's lower-precision list for CUDA only (PyTorch's CPU list lacks them)."""
    return _amp.lower(*tensors) if _amp._state.enabled and _amp._state.device == "cuda" else tensors


def _mm_checks(op, input, mat1, mat2, names=("input", "mat1", "mat2")):
    for t, n in zip((input, mat1, mat2), names):
        _need_tensor(t, op, n)


# ---- the add*mm family --------------------------------------------------------------------------------------
def _addmm(input, mat1, mat2, beta, alpha, op="addmm", inplace=False):
    _mm_checks(op, input, mat1, mat2)
    _need_ndim(mat1, 2, op, "mat1")
    _need_ndim(mat2, 2, op, "mat2")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
                           f"{mat2.shape[0]}x{mat2.shape[1]})")
    if _amp._state.enabled:  # lowered first: autocast's own bf16 result beside float32 matrices is fine
        input, mat1, mat2 = _amp.lower(input, mat1, mat2)
    _same_dtype(op, input=input, mat1=mat1, mat2=mat2)
    beta, alpha = _coef(beta, input._dtype, op, "beta"), _coef(alpha, input._dtype, op, "alpha")
    return _combine_product(input, mat1, mat2, beta, alpha, op, inplace)


def _addmv(input, mat, vec, beta, alpha, op="addmv", inplace=False):
    _mm_checks(op, input, mat, vec, ("input", "mat", "vec"))
    _need_ndim(mat, 2, op, "mat")
    _need_ndim(vec, 1, op, "vec")
    if mat.shape[1] != vec.shape[0]:
        raise RuntimeError(f"{op}: size mismatch, mat of shape {tuple(mat.shape)} cannot multiply vec of shape "
                           f"{tuple(vec.shape)}")
    _same_dtype(op, input=input, mat=mat, vec=vec)
    beta, alpha = _coef(beta, input._dtype, op, "beta"), _coef(alpha, input._dtype, op, "alpha")
    input, mat, vec = _lower_on_cuda(input, mat, vec)
    return _combine(input, _matmul(mat, vec), beta, alpha, op, inplace)


def _addr(input, vec1, vec2, beta, alpha, op="addr", inplace=False):
    """PyTorch's addr promotes its operands (unlike addmm); a float beta / alpha with an integer input is refused."""
    _mm_checks(op, input, vec1, vec2, ("input", "vec1", "vec2"))
    _need_ndim(vec1, 1, op, "vec1")
    _need_ndim(vec2, 1, op, "vec2")
    for name, v in (("beta", beta), ("alpha", alpha)):
        if not isinstance(v, numbers.Number) or isinstance(v, complex):
            raise TypeError(f"{op}(): argument '{name}' must be Number, not {type(v).__name__}")
        if input._dtype not in _FLOAT_CODES and isinstance(v, float):
            raise RuntimeError(f"{op}: For integral input tensors, argument {name} must not be a floating point "
                               f"number (got {v} with an input of dtype {_dt(input)})")
    input, vec1, vec2 = _lower_on_cuda(input, vec1, vec2)
    prod = vec1.reshape(-1, 1) * vec2.reshape(1, -1)
    if input._dtype == _BOOL and prod._dtype == _BOOL:  # bools: beta and alpha act as and / or (PyTorch's)
        out = prod if alpha else prod.logical_and(False)
        out = out.logical_or(input.expand(prod.shape)) if beta else out
        if inplace:
            if tuple(input.shape) != tuple(out.shape):
                raise RuntimeError(f"{op}: Bad in-place call: input tensor size {list(input.shape)} and output "
                                   f"tensor size {list(out.shape)} should match")
            _refuse_inplace(input, op)
            _C.copy_(input, out)
            return input
        return out
    return _combine(input, prod, beta, alpha, op, inplace)


def _baddbmm(input, batch1, batch2, beta, alpha, op="baddbmm", inplace=False):
    _mm_checks(op, input, batch1, batch2, ("input", "batch1", "batch2"))
    _need_ndim(batch1, 3, op, "batch1")
    _need_ndim(batch2, 3, op, "batch2")
    b, n, m = batch1.shape
    if tuple(batch2.shape[:2]) != (b, m):
        raise RuntimeError(f"{op}: expected size for the first two dimensions of batch2 to be [{b}, {m}] but got "
                           f"{list(batch2.shape[:2])} (batch1 {tuple(batch1.shape)}, batch2 {tuple(batch2.shape)})")
    if _amp._state.enabled:  # lowered first: autocast's own bf16 result beside float32 matrices is fine
        input, batch1, batch2 = _amp.lower(input, batch1, batch2)
    _same_dtype(op, input=input, batch1=batch1, batch2=batch2)
    beta, alpha = _coef(beta, input._dtype, op, "beta"), _coef(alpha, input._dtype, op, "alpha")
    return _combine_product(input, batch1, batch2, beta, alpha, op, inplace)


def _addbmm(input, batch1, batch2, beta, alpha, op="addbmm", inplace=False):
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]."""
    _mm_checks(op, input, batch1, batch2, ("input", "batch1", "batch2"))
    _need_ndim(batch1, 3, op, "batch1")
    _need_ndim(batch2, 3, op, "batch2")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"{op}: batch1 and batch2 must have the same number of matrices, got {batch1.shape[0]} "
                           f"and {batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"{op}: incompatible matrix sizes for bmm ({batch1.shape[1]}x{batch1.shape[2]} and "
                           f"{batch2.shape[1]}x{batch2.shape[2]})")
    if _amp._state.enabled:  # lowered first: autocast's own bf16 result beside float32 matrices is fine
        input, batch1, batch2 = _amp.lower(input, batch1, batch2)
    _same_dtype(op, input=input, batch1=batch1, batch2=batch2)
    beta, alpha = _coef(beta, input._dtype, op, "beta"), _coef(alpha, input._dtype, op, "alpha")
    # (n, b*k) @ (b*k, p): the batch sum done by the one matmul
    b, n, k = batch1.shape
    p = batch2.shape[2]
    return _combine_product(input, batch1.permute(1, 0, 2).reshape(n, b * k), batch2.reshape(b * k, p), beta,
                            alpha, op, inplace)


def _deprecated_overloads(function_form):
    """PyTorch's deprecated overloads of the add*mm family, beta (and alpha) as leading numbers, with its warning:
    Tensor.addmm_(beta, alpha, mat1, mat2) (pytorch-center-loss's distance matrix), Tensor.addmm(beta, mat1, mat2),
    torch.addmm(beta, input, alpha, mat1, mat2), torch.addmm(beta, input, mat1, mat2)."""
    def wrap(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            lead = 0 if function_form else 1  # a method's first argument is self
            if len(args) > lead + 2 and _is_number(args[lead]):
                rest = list(args)
                kwargs["beta"] = rest.pop(lead)
                at = 1  # alpha: after the function's input, or first after the method's self
                if len(rest) > 3 and _is_number(rest[at]):
                    kwargs["alpha"] = rest.pop(at)
                warnings.warn(f"This overload of {fn.__name__} is deprecated:\n\t{fn.__name__}(Number beta, "
                              f"Number alpha, Tensor, Tensor)\nConsider using one of the following signatures "
                              f"instead:\n\t{fn.__name__}(Tensor, Tensor, *, Number beta = 1, Number alpha = 1)",
                              UserWarning, stacklevel=2)
                args = tuple(rest)
            return fn(*args, **kwargs)
        return wrapper
    return wrap


def _is_number(x):
    return isinstance(x, numbers.Number) and not isinstance(x, bool)


@_deprecated_overloads(function_form=True)
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)."""
    return _addmm(input, mat1, mat2, beta, alpha)


@_deprecated_overloads(function_form=True)
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    return _addmv(input, mat, vec, beta, alpha)


@_deprecated_overloads(function_form=True)
def addmv_(input, mat, vec, *, beta=1, alpha=1):
    _need_tensor(input, "addmv_", "input")
    return input.addmv_(mat, vec, beta=beta, alpha=alpha)


@_deprecated_overloads(function_form=True)
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    return _addr(input, vec1, vec2, beta, alpha)


@_deprecated_overloads(function_form=True)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * bmm(batch1, batch2)."""
    return _baddbmm(input, batch1, batch2, beta, alpha)


@_deprecated_overloads(function_form=True)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum_i batch1[i] @ batch2[i]."""
    return _addbmm(input, batch1, batch2, beta, alpha)


# ---- vector products ------------------------------------------------------------------------------------
def mv(input, vec):
    """A matrix times a vector."""
    _need_tensor(input, "mv", "input")
    _need_tensor(vec, "mv", "vec")
    _need_ndim(input, 2, "mv", "input")
    _need_ndim(vec, 1, "mv", "vec")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"mv: size mismatch, got input ({input.shape[0]}x{input.shape[1]}) and vec "
                           f"({vec.shape[0]})")
    _same_dtype("mv", input=input, vec=vec)
    return _matmul(*_lower_on_cuda(input, vec))


def inner(input, other):
    """Sum of products over the last dims (a 0-d operand multiplies): shape input.shape[:-1] + other.shape[:-1]."""
    _need_tensor(input, "inner", "input")
    _need_tensor(other, "inner", "other")
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    if input._dtype != other._dtype:
        raise RuntimeError(f"inner(): both inputs should have the same dtype, got {_dt(input)} and {_dt(other)}")
    k = input.shape[-1]
    rows, cols = math.prod(input.shape[:-1]), math.prod(other.shape[:-1])
    out = input.reshape(rows, k).matmul(other.reshape(cols, k).transpose(0, 1))
    return out.reshape(tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


def vdot(input, other):
    """dot(conj(input), other): for real tensors, dot."""
    _need_tensor(input, "vdot", "input")
    _need_tensor(other, "vdot", "other")
    return input.dot(other)


def kron(input, other):
    """The Kronecker product: every entry of input times the whole of other, laid out block by block."""
    _need_tensor(input, "kron", "input")
    _need_tensor(other, "kron", "other")
    n = max(input.ndim, other.ndim)
    a_shape = (1,) * (n - input.ndim) + tuple(input.shape)
    b_shape = (1,) * (n - other.ndim) + tuple(other.shape)
    a = input.reshape(tuple(s for d in a_shape for s in (d, 1)))
    b = other.reshape(tuple(s for d in b_shape for s in (1, d)))
    return (a * b).reshape(tuple(x * y for x, y in zip(a_shape, b_shape)))


def _tensordot_dims(a, b, dims):
    """tensordot's dims as two lists of dim indices (of a, of b), checked as PyTorch checks them."""
    if isinstance(dims, _C.TensorBase):  # a 0-d count, or a (2, k) table of dims
        dims = int(dims.item()) if dims.ndim == 0 else [list(map(int, r)) for r in dims.tolist()]
    if isinstance(dims, numbers.Integral) and not isinstance(dims, bool):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        return list(range(a.ndim - dims, a.ndim)), list(range(dims))
    if isinstance(dims, (list, tuple)) and len(dims) == 2 and all(isinstance(d, (list, tuple)) for d in dims):
        da, db = (list(d) for d in dims)
        if len(da) != len(db):
            raise RuntimeError(f"tensordot: both dimension lists should have same length, got {da} and {db}")
        da = [_dim(d, a.ndim, "tensordot") for d in da]
        db = [_dim(d, b.ndim, "tensordot") for d in db]
        for ds in (da, db):
            for d in ds:
                if ds.count(d) > 1:
                    raise RuntimeError(f"tensordot: dim {d} appears multiple times in the list of dims")
        return da, db
    if isinstance(dims, (list, tuple)) and len(dims) == 2 and all(isinstance(d, numbers.Integral) for d in dims):
        raise TypeError(f"tensordot(): argument 'dims' must be an int or two lists of ints, got {dims!r} (write "
                        f"([{dims[0]}], [{dims[1]}]) to contract one dim of each)")
    raise RuntimeError(f"tensordot expects dims to be int or tuple[list[int], list[int]] or list[list[int]] "
                       f"containing two lists, but got dims={dims}")


def tensordot(a, b, dims=2):
    """Sum of products over dims of a paired with dims of b (an int n: a's last n with b's first n); the result
    has a's remaining dims, then b's. One matmul of the two tensors permuted and flattened."""
    _need_tensor(a, "tensordot", "a")
    _need_tensor(b, "tensordot", "b")
    da, db = _tensordot_dims(a, b, dims)
    if a._dtype != b._dtype:
        raise RuntimeError(f"tensordot: both inputs should have same dtype, got {_dt(a)} and {_dt(b)}")
    for i, j in zip(da, db):
        if a.shape[i] == b.shape[j]:
            continue
        if a.shape[i] == 1:  # a size 1 broadcasts against the other's, as in PyTorch
            a = a.expand(tuple(b.shape[j] if d == i else n for d, n in enumerate(a.shape)))
        elif b.shape[j] == 1:
            b = b.expand(tuple(a.shape[i] if d == j else n for d, n in enumerate(b.shape)))
        else:
            raise RuntimeError(f"tensordot: contracted dimensions need to match, but first has size {a.shape[i]} in "
                               f"dim {i} and second has size {b.shape[j]} in dim {j}")
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [j for j in range(b.ndim) if j not in db]
    k = math.prod(a.shape[i] for i in da)
    left = a.permute(tuple(free_a + da)).reshape(math.prod(a.shape[i] for i in free_a), k)
    right = b.permute(tuple(db + free_b)).reshape(k, math.prod(b.shape[j] for j in free_b))
    return left.matmul(right).reshape(tuple(a.shape[i] for i in free_a) + tuple(b.shape[j] for j in free_b))


def _chain_order(dims):
    """The matrix-chain split points (dynamic programming over dims[i] x dims[i+1] matrices): fewest products."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(mats, split, i, j):
    if i == j:
        return mats[i]
    k = split[i][j]
    return _chain(mats, split, i, k).matmul(_chain(mats, split, k + 1, j))


def _multi_dot(tensors, op):
    """The product of 2-D matrices (the first and last may be 1-D), in the cheapest order."""
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        _need_tensor(t, op, f"tensors[{i}]")
    first, last = tensors[0].ndim, tensors[-1].ndim
    if first not in (1, 2):
        raise RuntimeError(f"{op}: the first tensor must be 1D or 2D but got {first}D")
    if last not in (1, 2):
        raise RuntimeError(f"{op}: the last tensor must be 1D or 2D but got {last}D")
    for i, t in enumerate(tensors[1:-1], 1):
        if t.ndim != 2:
            raise RuntimeError(f"{op}: tensor {i} must be 2D but got {t.ndim}D")
    for i, t in enumerate(tensors[1:], 1):
        if t._dtype != tensors[0]._dtype:
            raise RuntimeError(f"{op}: all tensors must have the same dtype, but tensor 0 is {_dt(tensors[0])} "
                               f"and tensor {i} is {_dt(t)}")
    mats = [tensors[0].reshape(1, -1) if first == 1 else tensors[0]] + tensors[1:-1] + \
        [tensors[-1].reshape(-1, 1) if last == 1 else tensors[-1]]
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"{op}: tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                               f"{list(tensors[i + 1].shape)} cannot be multiplied")
    dims = [m.shape[0] for m in mats] + [mats[-1].shape[1]]
    out = _chain(mats, _chain_order(dims), 0, len(mats) - 1)
    shape = tuple(out.shape[:1] if first == 2 else ()) + tuple(out.shape[1:] if last == 2 else ())
    return out.reshape(shape)


def multi_dot(tensors):
    """torch.linalg.multi_dot: at least two tensors (gm.linalg exports it)."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"linalg.multi_dot(): argument 'tensors' must be a sequence of Tensors, not "
                        f"{type(tensors).__name__}")
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    return _multi_dot(tensors, "multi_dot()")


def chain_matmul(*matrices):
    """The product of 2-D matrices in the cheapest order (deprecated in PyTorch for linalg.multi_dot)."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
                  "parameters.", UserWarning, stacklevel=2)
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        _need_tensor(m, "chain_matmul", f"matrices[{i}]")
        if m.ndim != 2:
            raise RuntimeError(f"chain_matmul(): tensor {i} has {m.ndim} dimensions, expected 2")
    if len(matrices) == 1:
        return matrices[0].clone()
    return _multi_dot(matrices, "chain_matmul()")


# ---- cross products -----------------------------------------------------------------------------------------
def _cross(a, b, dim, op):
    _need_tensor(a, op, "input")
    _need_tensor(b, op, "other")
    if a.ndim != b.ndim:
        raise RuntimeError(f"{op}: inputs must have the same number of dimensions, got shapes {tuple(a.shape)} and "
                           f"{tuple(b.shape)}")
    if a._dtype != b._dtype:
        raise RuntimeError(f"{op}: expected both inputs to have the same dtype, got {_dt(a)} and {_dt(b)}")
    d = _dim(dim, a.ndim, op)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"{op}: inputs dimension {dim} must have length 3. Got {a.shape[d]} and {b.shape[d]}")
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return _cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def cross(input, other, dim=None):
    """The cross product of 3-vectors along dim; without dim, the first dim of size 3 (PyTorch's deprecated
    default, which it warns about once; linalg.cross takes the last dim)."""
    _need_tensor(input, "cross", "input")
    _need_tensor(other, "cross", "other")
    if dim is None:
        warn_once("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                  "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree with "
                  "that of linalg.cross in a future release.")
        shape = input.shape  # PyTorch's: the first dim of size 3 of input
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dimension of size 3 in input (shapes {tuple(input.shape)} and "
                               f"{tuple(other.shape)}); pass dim")
    return _cross(input, other, dim, "linalg.cross")


def linalg_cross(input, other, *, dim=-1):
    """torch.linalg.cross (gm.linalg exports it)."""
    return _cross(input, other, dim, "linalg.cross")


# ---- block matrices and index products -------------------------------------------------------------------------
def block_diag(*tensors):
    """The tensors (0-, 1- or 2-D; a vector is one row) on the diagonal of one matrix, zeros elsewhere."""
    mats = []
    for i, t in enumerate(tensors):
        _need_tensor(t, "block_diag", f"tensors[{i}]")
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")
        mats.append(t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t)
    if not mats:  # PyTorch's: an empty (1, 0) matrix of the default dtype
        return _zeros((1, 0), get_default_dtype().code, "cpu")
    code, dev = F.result_code(mats), mats[0]._device
    mats = [m if m._dtype == code else m.to(DTYPES[code]) for m in mats]
    width = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        h, w = m.shape
        parts = [p for p in (_zeros((h, left), code, dev), m, _zeros((h, width - left - w), code, dev))
                 if p.shape[1] or p is m]
        rows.append(_cat(parts, 1) if len(parts) > 1 else m)
        left += w
    return _cat(rows, 0) if len(rows) > 1 else rows[0].clone()


def cartesian_prod(*tensors):
    """Every combination of one entry from each 1-D tensor, one per row (itertools.product's order)."""
    if not tensors:
        raise RuntimeError("cartesian_prod: expects a non-empty list of tensors")
    for i, t in enumerate(tensors):
        _need_tensor(t, "cartesian_prod", f"tensors[{i}]")
        if t.ndim != 1:
            raise RuntimeError(f"cartesian_prod: Expect a 1D vector, but got shape {list(t.shape)} (tensors[{i}])")
    if len(tensors) == 1:
        return tensors[0]
    if len({t._dtype for t in tensors}) > 1:
        raise RuntimeError(f"cartesian_prod: expects all tensors to have the same dtype, got "
                           f"{[str(t.dtype) for t in tensors]}")
    shape = tuple(t.shape[0] for t in tensors)
    cols = [t.reshape(tuple(-1 if j == i else 1 for j in range(len(tensors)))).expand(shape).reshape(-1, 1)
            for i, t in enumerate(tensors)]
    return _cat(cols, 1)


def combinations(input, r=2, with_replacement=False):
    """The r-element combinations of a 1-D tensor's entries, one per row (itertools.combinations' order; with
    replacement, combinations_with_replacement's). The choice depends only on the size, so it is made on the host
    once and gathered."""
    _need_tensor(input, "combinations", "input")
    if input.ndim != 1:
        raise RuntimeError(f"combinations: Expect a 1D vector, but got shape {list(input.shape)}")
    if not isinstance(r, numbers.Integral) or isinstance(r, bool):
        raise TypeError(f"combinations(): argument 'r' must be int, not {type(r).__name__}")
    if r < 0:
        raise RuntimeError(f"combinations: Expect a non-negative number, but got {r}")
    if r == 0:
        return _zeros((0,), input._dtype, input._device)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(input.shape[0]), int(r))), np.int64).reshape(-1, int(r))
    flat = input.index_select(0, _C.from_numpy(np.asarray(idx.reshape(-1), order="C"), _I64, input._device))
    return flat.reshape(idx.shape)


# ---- diagonal matrices ----------------------------------------------------------------------------------------
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose diagonals `offset` over (dim1, dim2) hold input's last dim, zeros elsewhere."""
    _need_tensor(input, "diag_embed", "input")
    if not isinstance(offset, numbers.Integral) or isinstance(offset, bool):
        raise TypeError(f"diag_embed(): argument 'offset' must be int, not {type(offset).__name__}")
    nd = input.ndim + 1
    d1, d2 = _dim(dim1, nd, "diag_embed"), _dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    if input.ndim == 0:
        raise IndexError("diag_embed: Dimension out of range: a 0-d input has no last dim to embed")
    out = _DiagEmbed.apply(input, int(offset)) if _needs_grad(input) else _diag_embed(input, int(offset))
    # the two new dims are the last two: move them to (d1, d2)
    if (d1, d2) == (nd - 2, nd - 1):
        return out
    rest = iter(range(nd - 2))
    return out.permute(tuple(nd - 2 if i == d1 else nd - 1 if i == d2 else next(rest) for i in range(nd)))


def diagflat(input, offset=0):
    """input flattened, on diagonal `offset` of a square matrix."""
    _need_tensor(input, "diagflat", "input")
    if not isinstance(offset, numbers.Integral) or isinstance(offset, bool):
        raise TypeError(f"diagflat(): argument 'offset' must be int, not {type(offset).__name__}")
    return input.reshape(-1).diag(int(offset))


# ---- Vandermonde matrices ----------------------------------------------------------------------------------
def _powers(x, n):
    """x^0 ... x^(n-1) along a new last dim: running products of x (so the gradient is right at x = 0), after an
    exact column of ones."""
    ones = _C.empty(tuple(x.shape) + (min(n, 1),), x._dtype, x._device)
    _C.fill_(ones, 1)
    if n <= 1:
        return ones
    return _cat([ones, x.unsqueeze(-1).expand(tuple(x.shape) + (n - 1,)).cumprod(-1)], x.ndim)


def linalg_vander(x, N=None):
    """torch.linalg.vander (gm.linalg exports it): increasing powers of x's entries in a new last dim."""
    _need_tensor(x, "linalg.vander", "x")
    if x._dtype in (_BOOL, 2, 3):  # PyTorch's type: no kernel for bools and the low-precision floats
        raise NotImplementedError(f"linalg.vander supports float32, float64 and integer tensors, but got {_dt(x)}")
    x = x if x.ndim else x.reshape(1)  # PyTorch's: a 0-d x is one entry
    n = x.shape[-1] if N is None else N
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"linalg.vander(): argument 'N' must be int, not {type(n).__name__}")
    if n <= 1:
        raise RuntimeError(f"linalg.vander: N must be greater than 1, got {n}")
    x = x if x._dtype in _FLOAT_CODES or x._dtype == _I64 else x.to(DTYPES[_I64])
    return _powers(x, int(n))


# ---- Tensor methods ----------------------------------------------------------------------------------------
class ProductMethods(SolveMethods, StatsMethods):
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    @_deprecated_overloads(function_form=False)
    def addmm(self, mat1, mat2, *, beta=1, alpha=1):
        return _addmm(self, mat1, mat2, beta, alpha)

    @_deprecated_overloads(function_form=False)
    def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
        return _addmm(self, mat1, mat2, beta, alpha, "addmm_", inplace=True)

    @_deprecated_overloads(function_form=False)
    def addmv(self, mat, vec, *, beta=1, alpha=1):
        return _addmv(self, mat, vec, beta, alpha)

    @_deprecated_overloads(function_form=False)
    def addmv_(self, mat, vec, *, beta=1, alpha=1):
        return _addmv(self, mat, vec, beta, alpha, "addmv_", inplace=True)

    @_deprecated_overloads(function_form=False)
    def addr(self, vec1, vec2, *, beta=1, alpha=1):
        return _addr(self, vec1, vec2, beta, alpha)

    @_deprecated_overloads(function_form=False)
    def addr_(self, vec1, vec2, *, beta=1, alpha=1):
        return _addr(self, vec1, vec2, beta, alpha, "addr_", inplace=True)

    @_deprecated_overloads(function_form=False)
    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
        return _baddbmm(self, batch1, batch2, beta, alpha)

    @_deprecated_overloads(function_form=False)
    def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
        return _baddbmm(self, batch1, batch2, beta, alpha, "baddbmm_", inplace=True)

    @_deprecated_overloads(function_form=False)
    def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
        return _addbmm(self, batch1, batch2, beta, alpha)

    @_deprecated_overloads(function_form=False)
    def addbmm_(self, batch1, batch2, *, beta=1, alpha=1):
        return _addbmm(self, batch1, batch2, beta, alpha, "addbmm_", inplace=True)

    def mv(self, vec):
        return mv(self, vec)

    def inner(self, other):
        return inner(self, other)

    def vdot(self, other):
        return vdot(self, other)

    def kron(self, other):
        return kron(self, other)

    def cross(self, other, dim=None):
        return cross(self, other, dim)

    def diag_embed(self, offset=0, dim1=-2, dim2=-1):
        return diag_embed(self, offset, dim1, dim2)

    def diagflat(self, offset=0):
        return diagflat(self, offset)
