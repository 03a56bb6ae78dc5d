"""torch.signal.windows: SciPy's window functions of M points. sym=True (the default) gives the symmetric window
that filter design uses; sym=False the periodic one that spectral analysis uses (the symmetric window of M + 1
points without its last). Computed in float64 on the host and rounded once to the dtype (float32 or float64)."""
import math

import numpy as np

from .._core import creation as _c
from .._core.dtype import as_dtype, get_default_dtype

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _window(name, M, sym, dtype, device, requires_grad, values):
    """values(n, m) of n = 0 .. m - 1 (m = M, or M + 1 for a periodic window) as a tensor of M points."""
    if isinstance(M, bool) or not isinstance(M, int):
        raise TypeError(f"{name}: M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    dt = get_default_dtype() if dtype is None else as_dtype(dtype)
    if dt.name not in ("float32", "float64"):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dt}")
    if M <= 1:
        w = np.ones(M)
    else:
        m = M if sym else M + 1
        w = np.asarray(values(np.arange(m, dtype=np.float64), m), dtype=np.float64)[:M]
    return _c.tensor(np.ascontiguousarray(w), dtype=dt, device=device, requires_grad=requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sum over k of (-1)^k a[k] cos(2 pi k n / (M - 1))."""
    coefficients = [float(c) for c in a]
    if not coefficients:
        raise ValueError("general_cosine: Coefficients cannot be empty (a=[])")
    return _window("general_cosine", M, sym, dtype, device, requires_grad,
                   lambda n, m: sum((-1) ** k * c * np.cos(2 * math.pi * k * n / (m - 1))
                                    for k, c in enumerate(coefficients)))


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_hamming(M, alpha=0.54, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """1 - |2n / (M - 1) - 1|: a triangle, 0 at both ends."""
    return _window("bartlett", M, sym, dtype, device, requires_grad, lambda n, m: 1 - np.abs(2 * n / (m - 1) - 1))


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sin(pi (n + 1/2) / M)."""
    return _window("cosine", M, sym, dtype, device, requires_grad, lambda n, m: np.sin(math.pi * (n + 0.5) / m))


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """exp(-|n - center| / tau); center defaults to the middle, (M - 1) / 2 (M / 2 for a periodic window)."""
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    return _window("exponential", M, sym, dtype, device, requires_grad,
                   lambda n, m: np.exp(-np.abs(n - ((m - 1) / 2 if center is None else center)) / tau))


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """exp(-(n - (M - 1) / 2)^2 / (2 std^2))."""
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    return _window("gaussian", M, sym, dtype, device, requires_grad,
                   lambda n, m: np.exp(-((n - (m - 1) / 2) ** 2) / (2 * std * std)))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)."""
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    return _window("kaiser", M, sym, dtype, device, requires_grad,
                   lambda n, m: np.i0(beta * np.sqrt(np.clip(1 - (2 * n / (m - 1) - 1) ** 2, 0, None))) / np.i0(beta))
