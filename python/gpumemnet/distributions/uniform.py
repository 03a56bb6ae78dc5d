"""torch.distributions.Uniform."""
from numbers import Number

from . import _ops as T
from . import constraints
from .distribution import Distribution, _all_true, _size
from .utils import broadcast_all

__all__ = ["Uniform"]


class Uniform(Distribution):
    """The uniform distribution on the half-open interval [low, high)."""
    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return float("nan") * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        batch_shape = () if isinstance(low, Number) and isinstance(high, Number) else self.low.shape
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and not _all_true(self.low < self.high):
            raise ValueError(f"Uniform is not defined when low >= high: every low must be below its high, got "
                             f"low={self.low}, high={self.high}")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Uniform, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        new.low = self.low.expand(batch_shape)
        new.high = self.high.expand(batch_shape)
        super(Uniform, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rand = T.rand(tuple(shape), dtype=self.low.dtype, device=self.low.device)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).type_as(self.low)
        ub = self.high.gt(value).type_as(self.low)
        return T.log(lb.mul(ub)) - T.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return T.log(self.high - self.low)
