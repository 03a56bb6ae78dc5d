"""Complex tensors' math beyond arithmetic, as audio code uses it (torchaudio's phase vocoder, TimeStretch and
pitch shift pad, frame and take powers of complex spectrograms; its Frechet distance takes a complex sqrt): log,
sqrt, real powers, cumulative sums, frames, closeness and selection (F.pad pads each part). complex.py's
ComplexTensor inherits it. Each op is written on the real and imaginary parts (the (..., 2) real view, `_r`), so
autograd records real ops and a complex leaf's gradient keeps PyTorch's convention (dL/dRe + i dL/dIm)."""
import math

import numpy as np

from .. import _C
from . import creation as _c


def complex_dim(d, ndim):
    """A dim of the complex tensor as a dim of the (..., 2) tensor (a negative one counts from the parts' axis)."""
    if not -ndim <= d < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
    return d % ndim if ndim else 0


def split_parts(x):
    """(real, imaginary) of a complex tensor, a Python complex, a real tensor or a real number (imaginary 0)."""
    if isinstance(getattr(x, "_r", None), _C.TensorBase) and not isinstance(x, _C.TensorBase):
        return x._r[..., 0], x._r[..., 1]
    if isinstance(x, complex):
        return x.real, x.imag
    return x, 0.0


class ComplexMath:
    __slots__ = ()

    def _of(self, re, im):
        """The complex tensor of real parts re and im (tensors or numbers), broadcast together."""
        re, im = (v if isinstance(v, _C.TensorBase) else _c.tensor(float(v), dtype=self._r.dtype,
                                                                   device=self._r.device) for v in (re, im))
        shape = tuple(np.broadcast_shapes(tuple(re.shape), tuple(im.shape)))
        return type(self)(_c.stack([re.expand(shape), im.expand(shape)], -1))

    def log(self):
        """log|z| + i arg(z): the principal branch, as PyTorch's (-inf at 0)."""
        return self._of(self.abs().log(), self.angle())

    def sqrt(self):
        return self._real_power(0.5)

    def _real_power(self, p):
        """z ** p for a real p, |z|^p e^(i p arg z): the principal value, as PyTorch's pow of a complex tensor."""
        m, a = self.abs() ** p, self.angle() * p
        return self._of(m * a.cos(), m * a.sin())

    def cumsum(self, dim, dtype=None):
        r = self._r.cumsum(complex_dim(dim, self.ndim))
        return type(self)(r).to(dtype=dtype) if dtype is not None else type(self)(r)

    def unfold(self, dimension, size, step):
        """Frames of `size` along dimension, `step` apart (the frames' axis last, as Tensor.unfold)."""
        return type(self)(self._r.unfold(complex_dim(dimension, self.ndim), size, step).movedim(-2, -1))

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """|self - other| <= atol + rtol |other|, or equal (infinities), as PyTorch's isclose of complex values."""
        close = self == other
        if equal_nan:
            close = close | (self.isnan() & (other.isnan() if hasattr(other, "isnan") else math.isnan(abs(other))))
        err = (self - other).abs()
        allowed = atol + rtol * (other.abs() if hasattr(other, "abs") else abs(other))
        return close | (err.isfinite() & (err <= allowed))

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def where(self, condition, other):
        """torch.where(condition, self, other)."""
        return type(self)._select_where(condition, self, other)

    @classmethod
    def _select_where(cls, condition, input, other):
        """torch.where with a complex input or other (the other one real, complex, or a number)."""
        (a, b), (c, d) = split_parts(input), split_parts(other)
        ref = input if isinstance(input, cls) else other
        return ref._of(_c.where(condition, a, c), _c.where(condition, b, d))
