"""The values behind gm.special (special/__init__.py gives them their names, dtypes and gradients): functions of
float64 tensors that need no gradient, composed of elementwise ops so that they run on every device and on meta.

- erfcx: exp(x^2) erfc(x) with exp(x^2) split so that x^2 does not round; erfc's continued fraction past x = 8.
- log_ndtr / ndtri: erfcx in the left tail; the quantile by Halley's method on the CDF from Abramowitz and Stegun's
  start (erfinv in the centre).
- gammainc: the series of P and the continued fraction of Q, iterated until every element has converged.
- zeta: direct terms, then Euler-Maclaurin.
- J0, J1, Y0, Y1: power series below 2, Miller's backward recurrence (with Neumann's series for Y) to 40, Hankel's
  expansion beyond. K0, K1: series below 2, beyond it an exponentially convergent trapezoidal rule. Ai: series,
  that rule for K_(1/3) on the right, Miller's recurrence for J_(+-1/3) and the asymptotic expansion on the left.
These are accurate to a few units of 1e-15 (absolute next to zeros); PyTorch's own J, Y and Ai are off by up to
1e-6 in float64 (tests/test_special_ns.py compares both with PyTorch and with SciPy)."""
import math

from .._core import functions as _F
from .._core import tensor_gamma as _G
from .._core.creation import full as _full, where as _where
from .._core.creation_more import broadcast_tensors as _broadcast_tensors

_F64 = 1
_SQRT2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_INF, _NAN = math.inf, math.nan


def _is_meta(t):
    return t.device.type == "meta"


# ---- values (on float64 tensors outside the graph) ---------------------------------------------------------------
def _exp_square(x):
    """exp(x * x) without the rounding error of x * x (which exp multiplies by x * x): x = hi + lo with hi on a
    1/4096 grid, so that hi * hi is exact, and exp(x^2) = exp(hi^2) exp(lo (x + hi))."""
    hi = (x * 4096.0).round() / 4096.0
    lo = x - hi
    return (hi * hi).exp() * (lo * (x + hi)).exp()


_ERFCX_CF_FROM = 8.0  # below: exp(x^2) erfc(x) (erfc still normal, exp(x^2) exact); above: the continued fraction
_ERFCX_CF_TERMS = 40


def _erfcx(x):
    """exp(x^2) erfc(x): erfc's Laplace continued fraction 1 / sqrt(pi) / (x + (1/2) / (x + 1 / (x + ...))) where
    erfc would underflow."""
    direct = _exp_square(_where(x < _ERFCX_CF_FROM, x, 0.0)) * x.erfc()
    big = _where(x < _ERFCX_CF_FROM, _ERFCX_CF_FROM, x)
    f = big
    for k in range(_ERFCX_CF_TERMS, 0, -1):
        f = big + (0.5 * k) / f
    out = _where(x < _ERFCX_CF_FROM, direct, _INV_SQRT_PI / f)
    return _where(x == -_INF, _INF, out)


def _ndtr(x):
    """The normal CDF, accurate in the left tail (the slopes and Halley's steps need it there)."""
    return (x * (-1.0 / _SQRT2)).erfc() * 0.5


def _normal_pdf(x):
    return (x * x * -0.5).exp() * (1.0 / _SQRT_2PI)


def _log_ndtr(x):
    """log of the normal CDF: log1p(-Q(x)) on the right, log(erfcx(-x/sqrt 2) / 2) - x^2/2 below -1 (no
    underflow)."""
    left = _where(x < -1.0, x, -1.0)
    low = (_erfcx(left * (-1.0 / _SQRT2)) * 0.5).log() - left * left * 0.5
    right = _where(x < -1.0, -1.0, x)
    high = ((right * (1.0 / _SQRT2)).erfc() * -0.5).log1p()
    return _where(x < -1.0, low, high)


def _log_ndtr_slope(x):
    """pdf / cdf; written with erfcx below -1, where both underflow."""
    left = _where(x < -1.0, x, -1.0)
    low = math.sqrt(2.0 / math.pi) / _erfcx(left * (-1.0 / _SQRT2))
    return _where(x < -1.0, low, _normal_pdf(x) / _ndtr(x))


# Abramowitz and Stegun 26.2.23: the upper-tail quantile within 4.5e-4 (the starting point of Halley's method)
_AS_NUM = (2.515517, 0.802853, 0.010328)
_AS_DEN = (1.432788, 0.189269, 0.001308)


def _ndtri(p):
    """The normal quantile: for q = min(p, 1 - p) (1 - p exact above 0.5) a start within 4.5e-4, then Halley steps
    on ndtr(y) = q, whose relative accuracy holds down to the smallest normal q."""
    q = _where(p > 0.5, 1.0 - p, p)
    qs = _where((q > 0.0) & (q <= 0.5), q, 0.25)
    t = (qs.log() * -2.0).sqrt()
    num = _AS_NUM[0] + t * (_AS_NUM[1] + t * _AS_NUM[2])
    den = 1.0 + t * (_AS_DEN[0] + t * (_AS_DEN[1] + t * _AS_DEN[2]))
    y = num / den - t
    for _ in range(3):
        r = (_ndtr(y) - qs) / _normal_pdf(y)
        y = y - r / (1.0 + 0.5 * y * r)  # Halley: f''/f' = -y for the normal CDF
    y = _where(p > 0.5, -y, y)
    # the centre from erfinv (2p - 1 is exact there), which keeps relative accuracy next to 0
    middle = (p - 0.5).abs() < 0.25
    y = _where(middle, _G.erfinv(_where(middle, p * 2.0 - 1.0, 0.0)) * _SQRT2, y)
    y = _where(p == 0.0, -_INF, _where(p == 1.0, _INF, y))
    return _where((p < 0.0) | (p > 1.0) | (p != p), _NAN, y)


_BESSEL_SERIES_MAX = 30.0  # as tensor_gamma.bessel_i: the series below, the asymptotic series above


def _bessel_i_scaled(nu, x):
    """exp(-|x|) I_nu(x) (nu 0 or 1): the series value scaled where it is finite, else the asymptotic series
    1 / sqrt(2 pi x) (1 + sum a_k / x^k), which needs no exponential."""
    ax = x.abs()
    far = ax > _BESSEL_SERIES_MAX
    near = _where(far, 0.0, x)
    series = _G.bessel_i(nu, near) * (-near.abs()).exp()
    big = _where(far, ax, _BESSEL_SERIES_MAX)
    tail = 0.0
    for c in reversed(_G._asymptotic_coefficients(nu)):
        tail = (tail + c) / big
    asym = (tail + 1.0) / (big * (2.0 * math.pi)).sqrt()
    if nu == 1:
        asym = _where(x < 0.0, -asym, asym)
    return _where(far, asym, series)


def _i1_slope(x):
    """I1' = I0 - I1 / x (1/2 at 0)."""
    safe = _where(x == 0.0, 1.0, x)
    return _where(x == 0.0, 0.5, _G.bessel_i(0, x) - _G.bessel_i(1, x) / safe)


def _i1e_slope(x):
    """(e^-|x| I1)' = i0e - i1e (sign(x) + 1 / x) (1/2 at 0)."""
    safe = _where(x == 0.0, 1.0, x)
    return _where(x == 0.0, 0.5, _bessel_i_scaled(0, x) - _bessel_i_scaled(1, x) * (x.sign() + 1.0 / safe))


def _entr(x):
    inner = _where(x > 0.0, x, 1.0)
    out = _where(x > 0.0, -(inner * inner.log()), _where(x == 0.0, 0.0, -_INF))
    return _where(x != x, x, out)


# ---- regularized incomplete gamma --------------------------------------------------------------------------------
_TINY = 1e-300
_EPS = 4e-16  # a little above float64 rounding: the continued fraction's factors settle within it
_MAX_STEPS = 2000
_CHECK_EVERY = 8


def _all_true(flags):
    return _is_meta(flags) or bool(flags.all())


def _igamma_pair(a, x):
    """(P(a, x), Q(a, x)) for float64 tensors: the series of P where x < a + 1, the continued fraction of Q
    (modified Lentz) beyond, each iterated until all its elements have converged; the other is 1 minus it."""
    valid = (a > 0.0) & (x > 0.0) & a.isfinite() & x.isfinite()
    a_s, x_s = _where(valid, a, 1.0), _where(valid, x, 1.0)
    cf = x_s >= a_s + 1.0  # beyond, the continued fraction converges fast (Numerical Recipes' split)
    # series: P = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1) ... (a + n)); cf elements take x = a / 2 there
    xs = _where(cf, a_s * 0.5, x_s)
    term, total, ap = 1.0, 1.0, a_s
    for step in range(1, _MAX_STEPS + 1):
        ap = ap + 1.0
        term = term * xs / ap
        total = total + term
        if step % _CHECK_EVERY == 0 and _all_true(cf | (term <= total * _EPS)):
            break
    p_series = ((a_s * xs.log() - xs) - (a_s + 1.0).lgamma()).exp() * total
    # continued fraction: Q = x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)); series elements
    # take x = a + 2 there (their convergence is not waited for)
    xc = _where(cf, x_s, a_s + 2.0)
    b = xc + 1.0 - a_s
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    done = ~cf
    for i in range(1, _MAX_STEPS + 1):
        an = -i * (i - a_s)
        b = b + 2.0
        d = an * d + b
        d = _where(d.abs() < _TINY, _TINY, d)
        c = b + an / c
        c = _where(c.abs() < _TINY, _TINY, c)
        d = 1.0 / d
        delta = d * c
        # a converged element keeps its h: further factors only add rounding (an grows as i^2)
        h = _where(done, h, h * delta)
        done = done | ((delta - 1.0).abs() <= _EPS)
        if i % _CHECK_EVERY == 0 and _all_true(done):
            break
    q_cf = ((a_s * xc.log() - xc) - a_s.lgamma()).exp() * h
    p = _where(cf, 1.0 - q_cf, p_series)
    q = _where(cf, q_cf, 1.0 - p_series)
    # PyTorch's values off the interior, in its order: NaN for a negative argument; a = 0: 1 where x > 0 (else
    # NaN); x = 0: 0; a = inf: 0 (NaN where x = inf too); x = inf: 1; NaN elsewhere (a NaN argument)
    p_edge = _where((a < 0.0) | (x < 0.0), _NAN, _where(
        a == 0.0, _where(x > 0.0, 1.0, _NAN), _where(
            x == 0.0, 0.0, _where(a == _INF, _where(x == _INF, _NAN, 0.0), _where(x == _INF, 1.0, _NAN)))))
    p = _where(valid, p, p_edge)
    q = _where(valid, q, 1.0 - p_edge)
    return p, q


def _igamma_density(a, x):
    """d/dx P(a, x) = x^(a - 1) e^-x / Gamma(a)."""
    return ((a - 1.0) * x.log() - x - a.lgamma()).exp()


def _wide(fn, *xs):
    """fn of float64 copies of xs (detached), in the dtype of xs[0]."""
    code = xs[0]._dtype
    out = fn(*(x.detach() if x._dtype == _F64 else _F.cast(x.detach(), _F64) for x in xs))
    return out if code == _F64 else _F.cast(out, code)


# ---- Hurwitz zeta -------------------------------------------------------------------------------------------------
_ZETA_DIRECT = 10


def _zeta(x, q):
    """zeta(x, q) = sum_k (q + k)^-x for float64 tensors: the first terms summed until q + k >= 10 (for negative
    q, with integer x, as many more as -q: read on the host), the rest by Euler-Maclaurin (12 Bernoulli terms).
    PyTorch's values off the interior: inf at x = 1 and at the poles q = 0, -1, ...; NaN for x < 1, for q < 0 with
    x not an integer, and for q = inf."""
    shift = _ZETA_DIRECT
    pole = (q <= 0.0) & (q == q.floor())
    ok = (x > 1.0) & x.isfinite() & q.isfinite() & ~pole & ((q > 0.0) | (x == x.floor()))
    xs, qs = _where(ok, x, 2.0), _where(ok, q, 1.0)
    if not _is_meta(q) and q.numel() and bool((qs < 0.0).any()):  # negative q: more direct terms, to q + k > 9
        shift += int(math.ceil(-float(qs.min())))
    total = 0.0
    for k in range(shift):
        total = total + (qs + float(k)) ** (-xs)
    a = qs + float(shift)
    power = a ** (-xs)
    total = total + power * a / (xs - 1.0) + 0.5 * power
    rising, term = xs, power / a
    for j, bern in enumerate(_G._BERNOULLI, start=1):
        total = total + float(bern / math.factorial(2 * j)) * rising * term
        rising = rising * (xs + (2 * j - 1)) * (xs + 2 * j)
        term = term / (a * a)
    # PyTorch's values off the interior, in its order of precedence (last written here wins)
    out = _where((x != x) | (q != q) | (q == _INF), _NAN, total)
    out = _where(x == _INF, _where(q == 1.0, 1.0, _where(q < 1.0, _INF, _NAN)), out)
    out = _where(q <= 0.0, _where(pole, _INF, _where(x != x.floor(), _NAN, out)), out)
    out = _where(x < 1.0, _NAN, out)
    out = _where(x == 1.0, _INF, out)
    return out


# ---- orthogonal polynomials --------------------------------------------------------------------------------------
def _recurrence(x, n, first, step):
    """p_n(x) for per-element orders n (tensors of one dtype and device): p_0 = 1, p_1 = first(x) and
    p_(k+1) = step(k, x, p_k, p_(k-1)); 0 for negative n. The loop runs to the largest n (read on the host)."""
    x, n = _broadcast_tensors(x, n)
    p0, p1 = _full(tuple(x.shape), 1.0, dtype=x.dtype, device=x.device), first(x)
    out = _where(n == 0.0, p0, _where(n == 1.0, p1, 0.0))
    top = 1 if _is_meta(n) or n.numel() == 0 else int(_where(n == n, n, 0.0).max())
    for k in range(1, top):
        p0, p1 = p1, step(k, x, p1, p0)
        out = _where(n == float(k + 1), p1, out)
    return out


def _trig_chebyshev(kind, x, n):
    """Chebyshev T, U, V, W on (-1, 1) from theta = acos(x) (PyTorch's form for n > 6; the recurrence's rounding
    grows with n)."""
    theta = _where(x.abs() < 1.0, x, 0.0).acos()
    if kind == "t":
        return (n * theta).cos()
    if kind == "u":
        return ((n + 1.0) * theta).sin() / theta.sin()
    if kind == "v":
        return ((n + 0.5) * theta).cos() / (theta * 0.5).cos()
    return ((n + 0.5) * theta).sin() / (theta * 0.5).sin()


_CHEBYSHEV_FIRST = {"t": lambda x: x, "u": lambda x: 2.0 * x, "v": lambda x: 2.0 * x - 1.0,
                    "w": lambda x: 2.0 * x + 1.0}


# ---- Bessel functions of integer order and airy_ai ---------------------------------------------------------------
_EULER = 0.5772156649015329
_SERIES_TERMS = 30   # the power series below x = 2 (terms fall below 1e-17 of the first by then)
_MILLER_FROM, _MILLER_TOP = 2.0, 100  # Miller's backward recurrence on [2, 40], started at order 100
_HANKEL_FROM = 40.0  # Hankel's asymptotic expansion beyond (its terms fall below 1e-30)
_HANKEL_TERMS = 24


def _harmonic(k):
    return sum(1.0 / j for j in range(1, k + 1))


def _small_jy(x):
    """(J0, J1, Y0, Y1) by their power series (x in (0, 2]): Y from A&S 9.1.13 / 9.1.11."""
    q = -(x * x) * 0.25
    j0 = j1 = y0 = y1 = 0.0
    for k in range(_SERIES_TERMS, -1, -1):  # Horner in q
        fk, fk1 = math.factorial(k), math.factorial(k + 1)
        j0 = j0 * q + 1.0 / (fk * fk)
        j1 = j1 * q + 1.0 / (fk * fk1)
        y0 = y0 * q + _harmonic(k) / (fk * fk)
        y1 = y1 * q + (2.0 * _harmonic(k) + 1.0 / (k + 1) - 2.0 * _EULER) / (fk * fk1)
    j1 = j1 * x * 0.5
    log_half = (x * 0.5).log()
    y0 = (2.0 / math.pi) * ((log_half + _EULER) * j0 - y0)
    y1 = (2.0 / math.pi) * log_half * j1 - 2.0 / (math.pi * x) - x * (0.5 / math.pi) * y1
    return j0, j1, y0, y1


def _miller_jy(x):
    """(J0, J1, Y0, Y1) for x in [2, 40]: J_m by the backward recurrence J_(m-1) = 2m/x J_m - J_(m+1) from order
    100, normalized by 1 = J0 + 2 sum J_2k; Y0 by Neumann's series (2/pi)(L J0 - 2 sum_k (-1)^k J_2k / k), with
    L = log(x/2) + gamma, and Y1 = -Y0' = (2/pi)(L J1 - J0 / x + sum_k (-1)^k (J_(2k-1) - J_(2k+1)) / k)."""
    upper, cur = 0.0 * x, 0.0 * x + 1e-250  # J_(m+1), J_m, unnormalized
    norm = even = odd = 0.0
    for m in range(_MILLER_TOP, 0, -1):
        if m % 2 == 0:
            k = m // 2
            norm = norm + cur
            even = even + cur * ((-1.0) ** k / k)
        else:  # J_m's share of the Y1 sum: from k = j + 1 (as J_(2k-1)) and from k = j (as J_(2k+1))
            j = m // 2
            odd = odd + cur * ((-1.0) ** (j + 1) * (1.0 / (j + 1) + (1.0 / j if j else 0.0)))
        upper, cur = cur, (2.0 * m) / x * cur - upper
    scale = 1.0 / (cur + 2.0 * norm)
    j0, j1 = cur * scale, upper * scale
    big_l = (x * 0.5).log() + _EULER
    y0 = (2.0 / math.pi) * (big_l * j0 - 2.0 * even * scale)
    y1 = (2.0 / math.pi) * (big_l * j1 - j0 / x + odd * scale)
    return j0, j1, y0, y1


def _hankel_coefficients(nu):
    """a_k(nu) = prod_(j <= k) (4 nu^2 - (2j - 1)^2) / (k! 8^k) of Hankel's expansion."""
    coefs, c = [1.0], 1.0
    for k in range(1, _HANKEL_TERMS + 1):
        c = c * (4 * nu * nu - (2 * k - 1) ** 2) / (8.0 * k)
        coefs.append(c)
    return coefs


def _hankel_jy(nu, x):
    """(J_nu, Y_nu) for x > 40: sqrt(2/(pi x)) (P cos chi - Q sin chi) and (P sin chi + Q cos chi), chi = x -
    (nu/2 + 1/4) pi, written with cos x and sin x (exact) instead of chi (which would round)."""
    a = _hankel_coefficients(nu)
    inv = 1.0 / x
    p = q = 0.0
    for k in range(_HANKEL_TERMS // 2 - 1, -1, -1):
        p = p * (-inv * inv) + a[2 * k]
        q = q * (-inv * inv) + a[2 * k + 1]
    q = q * inv
    c, s = x.cos(), x.sin()
    if nu == 0:
        cos_chi, sin_chi = (c + s) / _SQRT2, (s - c) / _SQRT2
    else:
        cos_chi, sin_chi = (s - c) / _SQRT2, -(s + c) / _SQRT2
    amp = (2.0 / math.pi * inv).sqrt()
    return amp * (p * cos_chi - q * sin_chi), amp * (p * sin_chi + q * cos_chi)


def _bessel_jy(x):
    """(J0, J1, Y0, Y1) at |x| (J1 odd: the caller signs it; Y is NaN for x < 0, -inf at 0)."""
    ax = x.abs()
    small = ax <= _MILLER_FROM
    far = ax > _HANKEL_FROM
    s = _small_jy(_where(small, ax, 1.0))
    m = _miller_jy(_where(small | far, 3.0, ax))
    h0, h1 = _hankel_jy(0, _where(far, ax, 50.0)), _hankel_jy(1, _where(far, ax, 50.0))
    hank = (h0[0], h1[0], h0[1], h1[1])
    out = [_where(small, s[i], _where(far, hank[i], m[i])) for i in range(4)]
    out[0] = _where(ax == _INF, _NAN, out[0])
    out[1] = _where(ax == _INF, _NAN, _where(x < 0.0, -out[1], out[1]))
    for i in (2, 3):
        out[i] = _where(x < 0.0, _NAN, _where(x == 0.0, -_INF, _where(ax == _INF, _NAN, out[i])))
    out[1] = _where(x == 0.0, x, out[1])
    return out


def _over_x(f, x, at_zero):
    """f / x, at_zero at 0."""
    return _where(x == 0.0, at_zero, f / _where(x == 0.0, 1.0, x))


def _k_small(x):
    """(K0, K1) by their series (A&S 9.6.13, 9.6.11), x in (0, 2]."""
    q = x * x * 0.25
    s0 = s1 = 0.0
    for k in range(_SERIES_TERMS, -1, -1):
        fk, fk1 = math.factorial(k), math.factorial(k + 1)
        s0 = s0 * q + _harmonic(k) / (fk * fk)
        s1 = s1 * q + (_harmonic(k) + _harmonic(k + 1) - 2.0 * _EULER) / (fk * fk1)
    log_half = (x * 0.5).log()
    k0 = s0 - (log_half + _EULER) * _G.bessel_i(0, x)
    k1 = 1.0 / x + log_half * _G.bessel_i(1, x) - x * 0.25 * s1
    return k0, k1


_TRAPEZOID_STEP, _TRAPEZOID_END = 0.15, 6.5  # exp(-w^2) < 1e-18 past the end; the rule's error below 1e-17


def _k_scaled_integral(nu, z):
    """e^z K_nu(z) for z >= 2/3: the trapezoidal rule on e^z K_nu(z) = int_0^inf exp(-w^2) cosh(nu t) 2 dw /
    sqrt(2z + w^2), w = sqrt(2z) sinh(t/2) (exponentially accurate: the integrand is analytic and even)."""
    total = 0.0
    two_z = 2.0 * z
    for i in range(int(_TRAPEZOID_END / _TRAPEZOID_STEP) + 1):
        w = i * _TRAPEZOID_STEP
        weight = (0.5 if i == 0 else 1.0) * 2.0 * math.exp(-w * w) * _TRAPEZOID_STEP
        if nu == 0:
            total = total + weight / (two_z + w * w).sqrt()
        elif nu == 1:  # cosh t = 1 + w^2 / z
            total = total + weight * (1.0 + (w * w) / z) / (two_z + w * w).sqrt()
        else:
            t = (w / two_z.sqrt()).asinh() * 2.0
            total = total + weight * (t * nu).cosh() / (two_z + w * w).sqrt()
    return total


def _bessel_k_scaled(nu, x):
    """e^x K_nu(x), nu 0 or 1: NaN for x < 0, inf at 0, 0 at inf."""
    small = x <= 2.0
    k0, k1 = _k_small(_where(small & (x > 0.0), x, 1.0))
    series = (k0 if nu == 0 else k1) * _where(small, x, 0.0).exp()
    out = _where(small, series, _k_scaled_integral(nu, _where(small, 2.0, x)))
    return _where(x < 0.0, _NAN, _where(x == 0.0, _INF, out))


def _bessel_k(nu, x):
    """K_nu(x) = e^-x (e^x K_nu(x)) (0 where e^-x underflows)."""
    scaled = _bessel_k_scaled(nu, x)
    return _where(x == _INF, 0.0, scaled * (-_where(x > 0.0, x, 0.0)).exp())


_AIRY_AI0, _AIRY_AIP0 = 0.355028053887817239, 0.258819403792806798  # Ai(0), -Ai'(0)
_AIRY_SERIES_TERMS = 40


def _airy_series(x):
    """Ai(x) = Ai(0) f(x) + Ai'(0) g(x) by the Maclaurin series, for |x| <= 2."""
    cube = x * x * x
    f = g = 0.0
    # Horner on the term ratios f_k / f_(k-1) = x^3 / ((3k - 1) 3k) and g_k / g_(k-1) = x^3 / (3k (3k + 1))
    for k in range(_AIRY_SERIES_TERMS, 0, -1):
        f = (f + 1.0) * cube / ((3 * k - 1) * 3 * k)
        g = (g + 1.0) * cube / (3 * k * (3 * k + 1))
    return _AIRY_AI0 * (f + 1.0) - _AIRY_AIP0 * x * (g + 1.0)


def _gegenbauer(nu, k):
    """(nu + 2k) Gamma(nu + k) / k! (A&S 9.1.87: (z/2)^nu = sum_k of it times J_(nu+2k)(z))."""
    return (nu + 2 * k) * math.gamma(nu + k) / math.factorial(k) if (nu + k) != 0 else 1.0


def _bessel_j_fractional(nu, z):
    """J_nu(z) for nu in (-1, 1), z in [1.8, 40]: Miller's backward recurrence from order nu + 100, normalized by
    A&S 9.1.87."""
    upper, cur = 0.0 * z, 0.0 * z + 1e-250
    norm = 0.0
    for m in range(_MILLER_TOP, 0, -1):  # cur = J_(nu+m)
        if m % 2 == 0:
            norm = norm + cur * _gegenbauer(nu, m // 2)
        upper, cur = cur, (2.0 * (nu + m)) / z * cur - upper
    norm = norm + cur * (math.gamma(nu + 1.0))  # k = 0: nu Gamma(nu) = Gamma(nu + 1)
    return cur * ((z * 0.5) ** nu / norm)


def _airy_ai(x):
    """Ai(x): the series for |x| <= 2; for x >= 1 (1/pi) sqrt(x/3) K_(1/3)(zeta), zeta = (2/3) x^(3/2), by the
    integral; for x < -2 (sqrt|x| / 3)(J_(1/3) + J_(-1/3))(zeta) by Miller's recurrence, and beyond x = -15 the
    asymptotic expansion (A&S 10.4.60). NaN at +-inf (PyTorch's)."""
    ax = x.abs()
    zeta = ax * ax.sqrt() * (2.0 / 3.0)
    series = _airy_series(_where(ax <= 2.0, x, 0.0))
    zr = _where(x >= 1.0, zeta, 1.0)
    right = (_where(x >= 1.0, x, 1.0) / 3.0).sqrt() / math.pi * _k_scaled_integral(1.0 / 3.0, zr) * (-zr).exp()
    mid = (x < -2.0) & (zeta <= 40.0)
    zm = _where(mid, zeta, 2.0)
    left = (_bessel_j_fractional(1.0 / 3.0, zm) + _bessel_j_fractional(-1.0 / 3.0, zm)) * (
        _where(mid, ax, 2.0).sqrt() / 3.0)
    far = zeta > 40.0
    zf = _where(far, zeta, 50.0)
    u, coefs = 1.0, [1.0]
    for k in range(1, 20):
        u = u * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216.0 * k)
        coefs.append(u)
    inv = 1.0 / zf
    p = q = 0.0
    for k in range(9, -1, -1):
        p = p * (-inv * inv) + coefs[2 * k]
        q = q * (-inv * inv) + coefs[2 * k + 1]
    q = q * inv
    phase = zf + math.pi / 4.0
    asym = (phase.sin() * p - phase.cos() * q) / (_where(far, ax, 1.0).sqrt().sqrt() * math.sqrt(math.pi))
    out = _where(ax <= 2.0, series, _where(x > 0.0, right, _where(far, asym, left)))
    return _where((ax == _INF) | (x != x), _NAN, out)


def _j1_slope(x):
    """J1' = J0 - J1 / x (1/2 at 0)."""
    j0, j1, _, _ = _bessel_jy(x)
    return _where(x == 0.0, 0.5, j0 - _over_x(j1, x, 0.0))


def _y1_slope(x):
    """Y1' = Y0 - Y1 / x."""
    _, _, y0, y1 = _bessel_jy(x)
    return y0 - y1 / x
