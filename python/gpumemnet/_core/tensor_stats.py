"""cov, corrcoef and the trapezoid rules (trapezoid / trapz, cumulative_trapezoid), composed of existing ops the
way PyTorch composes them, so values, dtypes and gradients follow its. Tensor methods in StatsMethods (a base of
ProductMethods); tensor_products.py exports the gm.* functions. The checks on weights' values (fweights and
aweights must not be negative) read them on the host; on meta, which has no values, they are skipped."""
import numbers
import warnings

from .. import _C
from .tensor_methods import _dim

_FLOAT_CODES = (0, 1, 2, 3)


def _dt(t):
    """t's dtype as PyTorch's messages name it (float32, not gpumemnet.float32)."""
    return str(t.dtype).rsplit(".", 1)[-1]


def _need_tensor(x, op, arg):
    if not isinstance(x, _C.TensorBase):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _check_weights(w, name, n, floating):
    if w is None:
        return
    _need_tensor(w, "cov", name)
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with {w.ndim} "
                           f"dimensions")
    if w.numel() != n:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input "
                           f"but got {w.numel()} != {n}")
    if floating and w._dtype not in _FLOAT_CODES:
        raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with {_dt(w)} "
                           f"dtype")
    if not floating and (w._dtype in _FLOAT_CODES or w._dtype == 5):
        raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with {_dt(w)} dtype")
    if w._device != "meta" and n and bool((w < 0).any()):
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (a 1-D input: one variable), observations in the
    columns; fweights (integer counts) and aweights (float importance) weight the observations."""
    _need_tensor(input, "cov", "input")
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    if not isinstance(correction, numbers.Integral) or isinstance(correction, bool):
        raise TypeError(f"cov(): argument 'correction' must be int, not {type(correction).__name__}")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    n = x.shape[1]
    _check_weights(fweights, "fweights", n, False)
    _check_weights(aweights, "aweights", n, True)
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if w is None:
        w_sum = n
        avg = x.sum(1) / n
        norm = n - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
    if isinstance(norm, _C.TensorBase):
        if norm._device != "meta" and bool(norm <= 0):
            warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                          "observations.", UserWarning, stacklevel=2)
        norm = norm.clamp(min=0)
    elif norm <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=2)
        norm = 0
    xm = x - avg.unsqueeze(1)
    c = xm.matmul((xm if w is None else xm * w).transpose(0, 1))
    return (c / norm).squeeze()


def corrcoef(input):
    """Pearson's correlation coefficients of input's rows (cov scaled by the standard deviations, clipped to
    [-1, 1])."""
    _need_tensor(input, "corrcoef", "input")
    if input.ndim > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.reshape(-1, 1)
    c = c / std.reshape(1, -1)
    return c.clamp(-1, 1)


def _trapezoid_args(y, x, dx, dim, op):
    _need_tensor(y, op, "y")
    if x is not None and dx is not None:
        raise TypeError(f"{op}() received an invalid combination of arguments: give x (a Tensor) or dx (a number), "
                        f"not both")
    if x is not None and not isinstance(x, _C.TensorBase):
        raise TypeError(f"{op}(): argument 'x' must be Tensor, not {type(x).__name__} (a constant spacing is dx=)")
    if dx is not None and (not isinstance(dx, numbers.Number) or isinstance(dx, bool)):
        raise TypeError(f"{op}(): argument 'dx' must be Number, not {type(dx).__name__}")
    if y.ndim == 0:
        raise IndexError(f"{op}: Dimension specified as {dim} but tensor has no dimensions")
    return _dim(dim, y.ndim, op)


def _spacing(y, x, d, op):
    """x's differences along d, x viewed to line up with y (a 1-D x along d; a shorter x on the last dims)."""
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point (x has {x.shape[0]}, y has "
                               f"{y.shape[d]} along dim {d})")
        xv = x.reshape(tuple(-1 if i == d else 1 for i in range(y.ndim)))
    elif x.ndim < y.ndim:
        xv = x.reshape((1,) * (y.ndim - x.ndim) + tuple(x.shape))
    else:
        xv = x
    m = xv.shape[d]
    return xv.narrow(d, 1, m - 1) - xv.narrow(d, 0, m - 1)


def _zeros_except(y, d):
    out = _C.empty(tuple(s for i, s in enumerate(y.shape) if i != d), y._dtype, y._device)
    _C.fill_(out, 0)
    return out


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along dim: samples y at points x (a tensor) or a constant spacing dx (1 by default)."""
    d = _trapezoid_args(y, x, dx, dim, "trapezoid")
    n = y.shape[d]
    if n == 0:
        return _zeros_except(y, d)
    if x is None:
        dx = 1 if dx is None else dx
        return (y.sum(d) - (y.select(d, 0) + y.select(d, n - 1)) * 0.5) * dx
    step = _spacing(y, x, d, "trapezoid")
    return (step * (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1))).sum(d) / 2.0


def trapz(y, x=None, *, dx=None, dim=-1):
    """trapezoid's older name (PyTorch keeps both)."""
    d = _trapezoid_args(y, x, dx, dim, "trapz")
    return trapezoid(y, x, dx=dx, dim=d)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal rule along dim: one entry fewer than y there."""
    d = _trapezoid_args(y, x, dx, dim, "cumulative_trapezoid")
    n = y.shape[d]
    m = max(n - 1, 0)
    pairs = y.narrow(d, 0, m) + y.narrow(d, min(1, n), m)
    if x is None:
        dx = 1 if dx is None else dx
        return (pairs * (dx / 2.0)).cumsum(d)
    step = _spacing(y, x, d, "cumulative_trapezoid") if n else x.narrow(0, 0, 0)
    return ((step * pairs) / 2.0).cumsum(d)


class StatsMethods:
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    def cov(self, *, correction=1, fweights=None, aweights=None):
        return cov(self, correction=correction, fweights=fweights, aweights=aweights)

    def corrcoef(self):
        return corrcoef(self)
