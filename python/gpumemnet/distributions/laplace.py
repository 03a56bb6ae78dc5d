"""torch.distributions.Laplace."""
from numbers import Number

from . import _ops as T
from . import constraints
from .distribution import Distribution, _size
from .utils import broadcast_all

__all__ = ["Laplace"]


class Laplace(Distribution):
    """The Laplace distribution of location loc and scale scale."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = () if isinstance(loc, Number) and isinstance(scale, Number) else self.loc.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Laplace, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        super(Laplace, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        eps = T.finfo(self.loc.dtype).eps
        # u uniform on (eps - 1, 1): the inverse cdf below stays finite
        u = T.rand(shape, dtype=self.loc.dtype, device=self.loc.device) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * T.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -T.log(2 * self.scale) - T.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * T.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * T.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + T.log(2 * self.scale)
