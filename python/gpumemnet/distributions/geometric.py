"""torch.distributions.Geometric."""
from numbers import Number

from . import _ops as T
from . import constraints
from .distribution import Distribution, _all_true, _size
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits
from ..nn.functional import binary_cross_entropy_with_logits

__all__ = ["Geometric"]


class Geometric(Distribution):
    """The number of failures before the first success of Bernoulli(probs) trials (support 0, 1, 2, ...).
    Give exactly one of probs (in (0, 1]) and logits."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        param = probs if probs is not None else logits
        batch_shape = () if isinstance(param, Number) else (self.probs if probs is not None else self.logits).shape
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            value = self.probs
            valid = value > 0  # beyond unit_interval: a success must be possible
            if not _all_true(valid):
                raise ValueError(f"Expected parameter probs ({type(value).__name__} of shape {tuple(value.shape)}) "
                                 f"of distribution {self!r} to be positive but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
        super(Geometric, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return T.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        tiny = T.finfo(self.probs.dtype).tiny
        with T.no_grad():
            u = T.rand(shape, dtype=self.probs.dtype, device=self.probs.device).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = T.where((probs == 1) & (value == 0), T.zeros_like(probs), probs)  # 0 * log(0) is 0 here
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
