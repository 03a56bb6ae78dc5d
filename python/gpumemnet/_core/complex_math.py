"""Complex tensors' math beyond arithmetic, as audio and sequence-model code uses it (torchaudio's phase vocoder,
TimeStretch and pitch shift pad, frame and take powers of complex spectrograms; its Frechet distance takes a complex
sqrt; Mamba-style log-space scans take logs of negative numbers and their logcumsumexp): log, sqrt, real powers,
cumulative sums, products and logcumsumexp, sin / cos / tanh, frames, closeness and selection (F.pad pads each
part). complex.py's ComplexTensor inherits it. Each op is written on the real and imaginary parts (the (..., 2) real
view, `_r`), so autograd records real ops and a complex leaf's gradient keeps PyTorch's convention (dL/dRe +
i dL/dIm)."""
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

    def cumprod(self, dim, dtype=None):
        out = self._scan(dim, lambda a, b: a * b)
        return out.to(dtype=dtype) if dtype is not None else out

    def logcumsumexp(self, dim):
        """log(cumsum(exp(z))) along dim, without overflow: a log-step scan of a stable complex logaddexp (the
        log-space parallel scan of signed values that Mamba-style code runs: log of a negative number is complex)."""
        return self._scan(dim, _logaddexp)

    def _scan(self, dim, op):
        """The inclusive scan of op along dim in log2(n) steps (Hillis and Steele), as the real logcumsumexp."""
        d, n, shift, y = complex_dim(dim, self.ndim), self.shape[dim] if self.ndim else 1, 1, self
        while shift < n:
            head, rest = y._r.narrow(d, 0, shift), op(y.narrow(dim, shift, n - shift), y.narrow(dim, 0, n - shift))
            y = type(self)(_c.cat([head, rest._r], d))
            shift *= 2
        return y if y is not self else self.clone()

    def sin(self):
        a, b = self.real, self.imag
        return self._of(a.sin() * b.cosh(), a.cos() * b.sinh())

    def cos(self):
        a, b = self.real, self.imag
        return self._of(a.cos() * b.cosh(), -(a.sin() * b.sinh()))

    def tanh(self):
        """(sinh 2a + i sin 2b) / (cosh 2a + cos 2b); where |2a| > 40 that is sign(a) to double precision (and
        cosh would overflow)."""
        a2, b2 = self.real * 2, self.imag * 2
        big = a2.abs() > 40
        a2 = _c.where(big, 0.0, a2)
        den = a2.cosh() + b2.cos()
        return self._of(_c.where(big, self.real.sign(), a2.sinh() / den), _c.where(big, 0.0, b2.sin() / den))

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


def _logaddexp(a, b):
    """log(exp(a) + exp(b)) of complex tensors, shifted by the larger real part (0 where it is not finite)."""
    m = _c.maximum(a.real, b.real)
    m = _c.where(m.isfinite(), m, 0.0)
    return ((a - m).exp() + (b - m).exp()).log() + m
