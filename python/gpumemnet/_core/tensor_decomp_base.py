"""The shared helpers of the decompositions (tensor_decomp.py, tensor_decomp_lu.py): the argument checks with
PyTorch's exception types, the host round trip (NumPy arrays in, tensors on the input's device out) and the small
no-graph pieces their backward formulas use."""
import numpy as np

from .. import _C
from .dtype import SCALAR_TYPE_NAMES

BOOL, I64, I32 = 5, 4, 9
NAMES = SCALAR_TYPE_NAMES


# ---- checks and the host round trip -----------------------------------------------------------------------------
def check_matrices(A, op, *, arg="A", square=False, kernel=None, int_kernel=False, fn=None):
    """TypeError for a non-tensor, RuntimeError for fewer than 2 dims (or non-square matrices where square),
    NotImplementedError for a dtype other than float32 / float64 (PyTorch's types). kernel: PyTorch's kernel name
    for its '"kernel" not implemented for' message of float16 / bfloat16 (int_kernel: of the integer dtypes too;
    otherwise those get its 'Expected a floating point' message)."""
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"{fn or op}(): argument '{arg}' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {arg} must have at least 2 dimensions, got shape "
                           f"{tuple(A.shape)}")
    if A._dtype not in (0, 1):
        name = NAMES.get(A._dtype, str(A.dtype))
        if A._dtype > 3 and not int_kernel:
            raise NotImplementedError(f"{op}: Expected a floating point or complex tensor as input. Got {name}")
        raise NotImplementedError(f"{op}: \"{kernel or op}\" not implemented for '{name}' (float32 and float64 "
                                  f"are supported)")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {arg} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def host(A):
    """A's values as a NumPy array in its dtype (copied from the device if need be); not for meta tensors."""
    t = A.detach()
    return _C.TensorBase.numpy(t.cpu() if t._device != "cpu" else t)


def back(array, like, dtype=None):
    """A NumPy result as a tensor on like's device, in like's dtype (or dtype, a code)."""
    array = np.asarray(array, order="C")  # not ascontiguousarray, which makes a 0-d array 1-d
    return _C.from_numpy(array, like._dtype if dtype is None else dtype, like._device)


def empty(shape, like, dtype=None):
    return _C.empty(tuple(shape), like._dtype if dtype is None else dtype, like._device)


def zeros(shape, like, dtype=None):
    t = empty(shape, like, dtype)
    _C.fill_(t, 0)
    return t


def mm(a, b):
    return _C.matmul(a, b)


def mT(t):
    return t.transpose(-2, -1)


def pad(grads, n):
    """The engine hands backward the gradients up to the last output that received one (None for the others)."""
    return tuple(grads) + (None,) * (n - len(grads))


def eye(n, like, dtype=None):
    return _C.from_numpy(np.eye(n), like._dtype if dtype is None else dtype, like._device)


def eye_mask(n, like):
    return _C.from_numpy(np.eye(n, dtype=bool), BOOL, like._device)


def triangle_mask(n, like, k=0, lower=True):
    keep = np.tril(np.ones((n, n), bool), k) if lower else np.triu(np.ones((n, n), bool), k)
    return _C.from_numpy(keep, BOOL, like._device)
