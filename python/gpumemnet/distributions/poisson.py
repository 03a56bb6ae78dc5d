"""torch.distributions.Poisson."""
from numbers import Number

from . import _ops as T
from . import _samplers
from . import constraints
from .distribution import _size
from .exp_family import ExponentialFamily
from .utils import _xlogy, broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """The Poisson distribution of rate rate: P(k) = rate^k e^-rate / k!. Samples are drawn with gpumemnet's
    generator (_samplers.poisson: a host check per rejection round)."""
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = () if isinstance(rate, Number) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        new.rate = self.rate.expand(batch_shape)
        super(Poisson, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with T.no_grad():
            return _samplers.poisson(self.rate.expand(shape)).to(self.rate.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return _xlogy(value, rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self):
        return (T.log(self.rate),)

    def _log_normalizer(self, x):
        return T.exp(x)
