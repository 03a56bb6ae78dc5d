"""The hot reductions of Tensor (sum, mean, amax/amin, max/min, argmax/argmin, var/std), moved out of tensor.py
with their NumPy argument forms: `axis=` for dim, `keepdims=` for keepdim, NumPy integer dims (arg_forms.py).
Those forms are keyword-only parameters checked in one comparison, so the common call pays no wrapper."""
from .. import _C
from . import autocast as _amp
from . import functions as F
from .arg_forms import _NO, PLAIN_DIMS, dim_args
from .autograd import needs_grad as _needs_grad
from .dtype import as_dtype
from .return_types import ValuesIndices as _RESULT
from .state import warn_outside


def _legacy_unbiased(op, flag, unbiased, keepdim):
    """(dim, unbiased) for var / std called as PyTorch's legacy var(input, unbiased): a bool where dim goes is
    unbiased over every element (x.var(False) is the population variance, not the variance over dim 0)."""
    if unbiased is not None or keepdim is not False:
        raise TypeError(f"{op}(): a bool in place of dim is the legacy {op}(input, unbiased), which takes no other "
                        f"argument; got unbiased={unbiased!r}, keepdim={keepdim!r} beside it")
    return None, flag


def _warn_no_dof(op, x, dim, correction):
    """PyTorch's warning when a variance has no degrees of freedom left (the std of one sample is NaN: PPO's
    advantage normalisation over a one-sample minibatch), said by the op the user called."""
    dims = (dim,) if isinstance(dim, int) else dim
    n = x.numel()
    if dims:  # None or () reduces every dim, as PyTorch's
        n = 1
        for d in dims:
            n *= x.shape[d] if x.ndim else 1
    if n - correction <= 0:
        warn_outside(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                     f"factor (input numel divided by output numel).")

_amp_state = _amp._state


class ReduceMethods:
    __slots__ = ()

    def sum(self, dim=None, keepdim=False, dtype=None, *, axis=_NO, keepdims=_NO):
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("sum", dim, keepdim, axis, keepdims)
        x = _amp.fp32_on_cuda(self)[0] if _amp_state.enabled else self
        code = None if dtype is None else as_dtype(dtype).code
        if code is not None and (code not in (0, 1, 2, 3, 4) or (code == 4 and x._dtype <= 3)):
            # an integer accumulator other than int64 (`mask.sum(1, dtype=torch.int32)`), or of a float input: the
            # values as int64 (a float input truncated, as PyTorch casts it first), summed, and wrapped into the dtype
            return _C.reduce(F.SUM, F.cast(x.detach(), 4), dim, keepdim, 4).to(as_dtype(dtype))
        if _needs_grad(x):
            return F.Sum.apply(x, dim, keepdim, code)
        return _C.reduce(F.SUM, x, dim, keepdim, code)

    def mean(self, dim=None, keepdim=False, dtype=None, *, axis=_NO, keepdims=_NO):
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("mean", dim, keepdim, axis, keepdims)
        if dtype is not None:  # PyTorch casts the input to dtype first (an integer tensor's mean needs one)
            return self.to(dtype=dtype).mean(dim, keepdim)
        x = _amp.fp32_on_cuda(self)[0] if _amp_state.enabled else self
        return F.Mean.apply(x, dim, keepdim) if _needs_grad(x) else _C.reduce(F.MEAN, x, dim, keepdim)

    def amax(self, dim=None, keepdim=False, *, axis=_NO, keepdims=_NO):
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("amax", dim, keepdim, axis, keepdims)
        return F.AMaxMin.apply(self, dim, keepdim, True) if _needs_grad(self) else \
            _C.reduce(F.AMAX, self, dim, keepdim)

    def amin(self, dim=None, keepdim=False, *, axis=_NO, keepdims=_NO):
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("amin", dim, keepdim, axis, keepdims)
        return F.AMaxMin.apply(self, dim, keepdim, False) if _needs_grad(self) else \
            _C.reduce(F.AMIN, self, dim, keepdim)

    def max(self, dim=None, keepdim=False, *, axis=_NO, keepdims=_NO):
        """max() -> the largest value; max(dim) -> (values, indices); max(other_tensor) -> maximum."""
        if isinstance(dim, _C.TensorBase):  # before dim_args, which would read a 0-d int tensor as a dim
            return self.maximum(dim)
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("max", dim, keepdim, axis, keepdims)
        if dim is None:
            return F.AMaxMin.apply(self, None, False, True, True) if _needs_grad(self) else self.amax()
        return _RESULT["max"](*(F.MaxMinDim.apply(self, dim, keepdim, True) if _needs_grad(self) else
                                _C.max_dim(self, dim, keepdim)))

    def min(self, dim=None, keepdim=False, *, axis=_NO, keepdims=_NO):
        if isinstance(dim, _C.TensorBase):  # before dim_args, which would read a 0-d int tensor as a dim
            return self.minimum(dim)
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("min", dim, keepdim, axis, keepdims)
        if dim is None:
            return F.AMaxMin.apply(self, None, False, False, True) if _needs_grad(self) else self.amin()
        return _RESULT["min"](*(F.MaxMinDim.apply(self, dim, keepdim, False) if _needs_grad(self) else
                                _C.min_dim(self, dim, keepdim)))

    def argmax(self, dim=None, keepdim=False, *, axis=_NO, keepdims=_NO):
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("argmax", dim, keepdim, axis, keepdims)
        return _C.argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False, *, axis=_NO, keepdims=_NO):
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("argmin", dim, keepdim, axis, keepdims)
        return _C.argmin(self, dim, keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, correction=None, *, axis=_NO, keepdims=_NO, _op="var"):
        if dim.__class__ is bool:
            dim, unbiased = _legacy_unbiased(_op, dim, unbiased, keepdim)
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("var", dim, keepdim, axis, keepdims)
        if correction is None:
            correction = 0 if unbiased is False else 1
        _warn_no_dof(_op, self, dim, correction)
        x = _amp.fp32_on_cuda(self)[0] if _amp_state.enabled else self
        return F.Var.apply(x, dim, correction, keepdim) if _needs_grad(x) else _C.var(x, dim, correction, keepdim)

    def std(self, dim=None, unbiased=None, keepdim=False, correction=None, *, axis=_NO, keepdims=_NO, _op="std"):
        if dim.__class__ is bool:
            dim, unbiased = _legacy_unbiased(_op, dim, unbiased, keepdim)
        if axis is not _NO or keepdims is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim, keepdim = dim_args("std", dim, keepdim, axis, keepdims)
        v = self.var(dim, unbiased, keepdim, correction, _op=_op)
        if not v.requires_grad:
            return v.sqrt()
        # sqrt's gradient at 0 is inf, and times var's 0 a NaN; PyTorch's std gives 0 where std == 0 (a constant
        # feature under (z - z.mean(0)) / z.std(0)): the square root reads 1 there and the result takes 0
        zero = v == 0
        return v.where(~zero, 1.0).sqrt().where(~zero, 0.0)
