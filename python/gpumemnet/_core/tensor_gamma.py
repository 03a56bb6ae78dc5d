"""The values of lgamma, digamma, polygamma, erfinv and the modified Bessel functions I0 / I1 (i0 and its
derivative), composed of elementwise ops (so they run on every device
and are priced on meta). tensor_special.py gives them their PyTorch names, dtypes and gradients.

Every function here takes and returns a float64 tensor that needs no gradient: float32 inputs are computed in
float64 and rounded once, which makes them exact to float32 rounding. float64 results are within a few units of
1e-15 relative (absolute near the functions' zeros, where any sum of terms of size 1 loses relative accuracy).

- lgamma: Lanczos' approximation (g = 7, 9 terms) for x >= 0.5, the reflection formula below.
- digamma: the asymptotic series at x + 10, shifted back by the recurrence psi(x) = psi(x + 1) - 1/x; the
  reflection psi(x) = psi(1 - x) - pi cot(pi x) for x < 0.
- polygamma(n >= 1): (-1)^(n+1) n! zeta(n + 1, x), the Hurwitz zeta by Euler-Maclaurin summation; for x < 0 the
  reflection formula with the n-th derivative of cot written as a polynomial in cot.
- erfinv: Winitzki's closed-form approximation (relative error < 2e-3), then Newton steps on erf (erfc past 0.5,
  where erf's value has lost the digits that matter).
- I0, I1: the power series (positive terms) up to |x| = 30, the asymptotic series e^x / sqrt(2 pi x) (1 + ...)
  beyond; finite up to float64's limit (PyTorch's i0 reaches inf near |x| = 710, a little earlier)."""
import math
from fractions import Fraction

from .. import _C

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)
# Bernoulli numbers B_2, B_4, ..., B_24
_BERNOULLI = (Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
              Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798),
              Fraction(-174611, 330), Fraction(854513, 138), Fraction(-236364091, 2730))
_SHIFT = 10  # the recurrences move x to x + 10 (and more for high n), where the asymptotic series converge fast


def _where(c, a, b):
    return _C.where(c, a, b)


def _sin_pi(r):
    """sin(pi r) for r in [-0.5, 0.5] (the caller reduced x exactly by round(x))."""
    return (r * math.pi).sin()


def _reduced(x):
    """x - round(x): exact in floating point, in [-0.5, 0.5]; sin(pi x) and cot(pi x) from it keep their digits
    for large |x|, where pi * x would not."""
    return x - x.round()


def _lanczos_lgamma(y):
    """lgamma(y) for y >= 0.5."""
    z = y - 1.0
    a = _LANCZOS[0]
    for i in range(1, len(_LANCZOS)):
        a = a + _LANCZOS[i] / (z + float(i))
    t = z + (_LANCZOS_G + 0.5)
    # (z + 1/2) log t - t written as (z + 1/2)(log t - 1) - g: finite up to lgamma's own overflow
    return (z + 0.5) * (t.log() - 1.0) + (0.5 * math.log(2 * math.pi) - _LANCZOS_G) + a.log()


def lgamma(x):
    """log |Gamma(x)|; +inf at the poles 0, -1, -2 ... and at +-inf."""
    left = x < 0.5
    y = _where(left, 1.0 - x, x)
    core = _lanczos_lgamma(y)
    # Gamma(x) Gamma(1 - x) = pi / sin(pi x)
    reflected = math.log(math.pi) - _sin_pi(_reduced(x)).abs().log() - core
    out = _where(left, reflected, core)
    out = _where((x == 1.0) | (x == 2.0), 0.0, out)  # exact zeros, as the sum of terms of size 1 is not
    return _where(x.isinf(), math.inf, out)


def _digamma_asymptotic(y):
    """psi(y) for y >= 10: log y - 1/(2y) - sum B_2k / (2k y^2k)."""
    w = 1.0 / (y * y)
    series = 0.0
    for k in range(7, 0, -1):  # Horner in 1/y^2, terms to y^-14: below 1e-17 at y = 10
        series = (series + float(_BERNOULLI[k - 1] / (2 * k))) * w
    return y.log() - 0.5 / y - series


def digamma(x):
    """psi(x) = d/dx lgamma(x); -inf at +0 (+inf at -0), NaN at the negative integers and -inf (PyTorch's)."""
    left = x < 0.0
    y = _where(left, 1.0 - x, x)
    shifted = _digamma_asymptotic(y + float(_SHIFT))
    for k in range(_SHIFT):
        shifted = shifted - 1.0 / (y + float(k))
    r = _reduced(x)
    reflected = shifted - math.pi * (r * math.pi).cos() / _sin_pi(r)
    out = _where(left, reflected, shifted)
    out = _where(x == 0.0, _where(1.0 / x < 0.0, math.inf, -math.inf), out)
    return _where(left & (r == 0.0), math.nan, out)


def _hurwitz_zeta(s, y):
    """zeta(s, y) = sum_k (y + k)^-s for y > 0 and an integer s >= 2: the first terms summed, the rest by
    Euler-Maclaurin at y + N."""
    n_direct = _SHIFT + s
    total = 0.0
    for k in range(n_direct):
        total = total + (y + float(k)) ** float(-s)
    a = y + float(n_direct)
    inv = 1.0 / a
    power = a ** float(-s)  # a^-s
    total = total + power * a / float(s - 1) + 0.5 * power
    rising = Fraction(s)  # s (s + 1) ... (s + 2j - 2)
    term = power * inv  # a^(-s - 1)
    for j, b in enumerate(_BERNOULLI, start=1):
        coef = b / math.factorial(2 * j) * rising
        total = total + float(coef) * term
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        term = term * (inv * inv)
    return total


def _cot_derivative_poly(n):
    """Coefficients (lowest degree first) of P_n with d^n/dz^n cot z = P_n(cot z): P_0 = c and
    P_(k+1) = -(1 + c^2) P_k'(c)."""
    p = [0, 1]
    for _ in range(n):
        d = [i * p[i] for i in range(1, len(p))] + [0, 0]  # P'(c), padded for the c^2 factor
        p = [-(d[i] + (d[i - 2] if i >= 2 else 0)) for i in range(len(d))]
    while len(p) > 1 and p[-1] == 0:
        p.pop()
    return p


def polygamma(n, x):
    """The n-th derivative of digamma (n >= 1); at the poles 0, -1, -2 ...: +inf for odd n, -inf for even n."""
    left = x < 0.0
    y = _where(left, 1.0 - x, x)
    sign = 1.0 if n % 2 else -1.0
    direct = _hurwitz_zeta(n + 1, y) * (sign * math.factorial(n))
    # psi_n(x) = -pi^(n+1) P_n(cot(pi x)) + (-1)^n psi_n(1 - x)
    r = _reduced(x)
    c = (r * math.pi).cos() / _sin_pi(r)
    poly = 0.0
    for coef in reversed(_cot_derivative_poly(n)):
        poly = poly * c + float(coef)
    reflected = poly * (-math.pi ** (n + 1)) + direct * (-sign)
    out = _where(left, reflected, direct)
    if n == 1:  # PyTorch's trigamma: 0 at +inf (NaN at -inf, as here)
        out = _where(x == math.inf, 0.0, out)
    else:  # PyTorch's zeta: -inf counts as a pole (NaN at +inf, as here)
        r = _where(x == -math.inf, 0.0, r)
    pole = (x <= 0.0) & (r == 0.0)
    return _where(pole, sign * math.inf, out)


_WINITZKI_A = 0.147
_NEWTON_STEPS = 4


def erfinv(x):
    """The inverse of erf on [-1, 1]: +-inf at +-1, NaN outside."""
    ax = x.abs()
    log_term = (1.0 - ax * ax).log()  # log(1 - x^2): -inf at |x| = 1, NaN beyond
    b = 2.0 / (math.pi * _WINITZKI_A) + 0.5 * log_term
    y = ((b * b - log_term / _WINITZKI_A).sqrt() - b).sqrt()  # |erfinv(x)| within 2e-3 relative
    y = _where(ax == 0.0, 0.0, y)
    tail = ax > 0.5
    one_minus = 1.0 - ax  # exact for ax in [0.5, 1]
    half_sqrt_pi = 0.5 * math.sqrt(math.pi)
    for _ in range(_NEWTON_STEPS):
        # f(y) = erf(y) - |x|, or erfc(|x|) form in the tail; f'(y) = 2/sqrt(pi) exp(-y^2)
        resid = _where(tail, one_minus - y.erfc(), y.erf() - ax)
        y = y - resid * half_sqrt_pi * (y * y).exp()
    y = _where(ax == 1.0, math.inf, y)
    return _where(x < 0.0, -y, y)


_BESSEL_SERIES_MAX = 30.0  # below: the power series (64 terms of positive values); above: the asymptotic series
_BESSEL_SERIES_TERMS = 64
_BESSEL_ASYMPTOTIC_TERMS = 24


def _asymptotic_coefficients(nu):
    """a_k of I_nu(x) ~ e^x / sqrt(2 pi x) (1 + sum_k a_k / x^k): a_k = -a_(k-1) (4 nu^2 - (2k - 1)^2) / (8k)."""
    coefs, c = [], 1.0
    for k in range(1, _BESSEL_ASYMPTOTIC_TERMS + 1):
        c = -c * (4 * nu * nu - (2 * k - 1) ** 2) / (8 * k)
        coefs.append(c)
    return coefs


def bessel_i(nu, x):
    """I_nu(x) for nu 0 (even) or 1 (odd in x); inf past float64's range."""
    ax = x.abs()
    q = ax * ax * 0.25
    series = 0.0
    for k in range(_BESSEL_SERIES_TERMS, -1, -1):  # sum q^k / (k! (k + nu)!), by Horner: positive terms
        series = series * q + 1.0 / (math.factorial(k) * math.factorial(k + nu))
    if nu == 1:
        series = series * (ax * 0.5)
    big = _where(ax > _BESSEL_SERIES_MAX, ax, _BESSEL_SERIES_MAX)  # the asymptotic branch, kept away from 0
    tail = 0.0
    for c in reversed(_asymptotic_coefficients(nu)):
        tail = (tail + c) / big
    half = (big * 0.5).exp()  # e^x / sqrt(2 pi x) as two factors: e^x alone overflows before the result does
    asym = half * (half / (big * (2 * math.pi)).sqrt()) * (tail + 1.0)
    out = _where(ax > _BESSEL_SERIES_MAX, asym, series)
    return out if nu == 0 else _where(x < 0.0, -out, out)
