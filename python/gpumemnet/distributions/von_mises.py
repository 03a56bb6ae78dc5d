"""torch.distributions.VonMises."""
import math

from . import _ops as T
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]


def _eval_poly(y, coef):
    coef = list(coef)
    result = coef.pop()
    while coef:
        result = coef.pop() + y * result
    return result


# Abramowitz and Stegun 9.8.1-9.8.4: polynomial approximations of the modified Bessel functions I0 and I1
_I0_COEF_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2]
_I0_COEF_LARGE = [0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1, 0.2635537e-1,
                  -0.1647633e-1, 0.392377e-2]
_I1_COEF_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3]
_I1_COEF_LARGE = [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1,
                  -0.2895312e-1, 0.1787654e-1, -0.420059e-2]
_COEF_SMALL = [_I0_COEF_SMALL, _I1_COEF_SMALL]
_COEF_LARGE = [_I0_COEF_LARGE, _I1_COEF_LARGE]


def _log_modified_bessel_fn(x, order=0):
    """log I_order(x) for x > 0, order 0 or 1 (the same approximation as PyTorch's)."""
    if order not in (0, 1):
        raise AssertionError(f"order must be 0 or 1, got {order}")
    y = (x / 3.75) * (x / 3.75)
    small = _eval_poly(y, _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    y = 3.75 / x
    large = x - 0.5 * x.log() + _eval_poly(y, _COEF_LARGE[order]).log()
    return T.where(x < 3.75, small, large)


def _rejection_sample(loc, concentration, proposal_r, shape):
    """Best and Fisher's wrapped-Cauchy rejection sampler, every entry at once (a host check per round)."""
    x = T.zeros(shape, dtype=loc.dtype, device=loc.device)
    bad = ~(concentration > 0) | (concentration == float("inf"))  # NaN, <= 0 or inf: NaN, not a hang
    done = bad.clone()
    while not bool(done.all()):
        u1, u2, u3 = (T.rand(shape, dtype=loc.dtype, device=loc.device) for _ in range(3))
        z = (math.pi * u1).cos()
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
        accept = accept & ~done
        x = T.where(accept, (u3 - 0.5).sign() * f.acos(), x)
        done = done | accept
    x = (x + math.pi + loc) % (2 * math.pi) - math.pi
    return T.where(bad, T.full_like(x, math.nan), x)


class VonMises(Distribution):
    """The von Mises (circular normal) distribution of mean angle loc and concentration concentration, on the
    circle, with samples in [-pi, pi). No rsample (as PyTorch's)."""
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, (), validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * (value - self.loc).cos()
        return log_prob - math.log(2 * math.pi) - _log_modified_bessel_fn(self.concentration, order=0)

    @lazy_property
    def _loc(self):
        return self.loc.to(T.float64)

    @lazy_property
    def _concentration(self):
        return self.concentration.to(T.float64)

    @lazy_property
    def _proposal_r(self):
        kappa = self._concentration
        tau = 1 + (1 + 4 * kappa ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        proposal_r = (1 + rho ** 2) / (2 * rho)
        proposal_r_taylor = 1 / kappa + kappa  # where rho's formula loses every digit
        return T.where(kappa < 1e-5, proposal_r_taylor, proposal_r)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with T.no_grad():
            if self.loc.device.type == "meta":
                return T.empty(shape, dtype=self.loc.dtype, device=self.loc.device)
            out = _rejection_sample(self._loc.expand(shape), self._concentration.expand(shape),
                                    self._proposal_r.expand(shape), shape)
            return out.to(self.loc.dtype)

    def expand(self, batch_shape, _instance=None):
        try:
            return super().expand(batch_shape)
        except NotImplementedError:
            validate_args = self.__dict__.get("_validate_args")
            return type(self)(self.loc.expand(batch_shape), self.concentration.expand(batch_shape),
                              validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        """The circular variance 1 - I1(kappa) / I0(kappa)."""
        return 1 - (_log_modified_bessel_fn(self.concentration, order=1)
                    - _log_modified_bessel_fn(self.concentration, order=0)).exp()
