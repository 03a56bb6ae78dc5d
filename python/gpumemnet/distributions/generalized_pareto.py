"""torch.distributions.GeneralizedPareto."""
import math
from numbers import Number, Real

from . import _ops as T
from . import constraints
from .distribution import Distribution, _size
from .utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution of location loc, scale scale and shape concentration (exponential
    at concentration 0, bounded above for concentration < 0)."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if isinstance(loc, Number) and isinstance(scale, Number) and isinstance(concentration, Number):
            batch_shape = ()
        else:
            batch_shape = self.loc.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(GeneralizedPareto, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _safe_concentration(self):
        """(concentration == 0, concentration with 1 there): the formulas divide by it."""
        eq_zero = T.isclose(self.concentration, T.zeros_like(self.concentration))
        return eq_zero, T.where(eq_zero, T.ones_like(self.concentration), self.concentration)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        u = T.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + T.ones_like(z)
        where_nonzero = T.where(y == 0, y, y * T.log1p(safe_conc * z))
        log_scale = math.log(self.scale) if isinstance(self.scale, Real) else self.scale.log()
        return -log_scale - T.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        where_nonzero = -T.log1p(safe_conc * z) / safe_conc
        return T.where(eq_zero, -z, where_nonzero)

    def log_cdf(self, value):
        return T.log1p(-T.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return T.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, safe_conc = self._safe_concentration()
        logu = T.log1p(-value)
        where_nonzero = self.loc + self.scale / safe_conc * T.expm1(-safe_conc * logu)
        where_zero = self.loc - self.scale * logu
        return T.where(eq_zero, where_zero, where_nonzero)

    def _z(self, x):
        return (x - self.loc) / self.scale

    @property
    def mean(self):
        valid = self.concentration < 1
        safe_conc = T.where(valid, self.concentration, T.full_like(self.concentration, 0.5))
        result = self.loc + self.scale / (1 - safe_conc)
        return T.where(valid, result, T.full_like(result, math.nan))

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe_conc = T.where(valid, self.concentration, T.full_like(self.concentration, 0.25))
        result = self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return T.where(valid, result, T.full_like(result, math.nan))

    def entropy(self):
        ans = T.log(self.scale) + self.concentration + 1
        return T.broadcast_to(ans, tuple(self._batch_shape))

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = T.where(self.concentration < 0, lower - self.scale / self.concentration,
                        T.full_like(lower, math.inf))
        return constraints.interval(lower, upper)
