"""torch.distributions.Binomial."""
from . import _ops as T
from . import _samplers
from . import constraints
from .distribution import Distribution
from ._count_probs import expand_count_and_probs_or_logits, set_count_and_probs_or_logits
from .utils import lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Binomial"]


def _clamp_by_zero(x):
    # x.clamp(min=0) with gradient 1/2 at 0 (PyTorch's)
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    """The number of successes in total_count Bernoulli(probs) trials. Give exactly one of probs and logits;
    total_count broadcasts with it."""
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        super().__init__(set_count_and_probs_or_logits(self, total_count, probs, logits), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return expand_count_and_probs_or_logits(Binomial, self, batch_shape, _instance)

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().minimum(self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return T.Size(self._param.shape)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with T.no_grad():
            draws = _samplers.binomial(self.total_count.expand(shape), self.probs.expand(shape))
            return draws.to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = T.lgamma(self.total_count + 1)
        log_factorial_k = T.lgamma(value + 1)
        log_factorial_nmk = T.lgamma(self.total_count - value + 1)
        # n log(1 + e^l) written so that it neither overflows nor loses digits
        normalize_term = (self.total_count * _clamp_by_zero(self.logits)
                          + self.total_count * T.log1p(T.exp(-T.abs(self.logits))) - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def _homogeneous_count(self, what):
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total_count

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(T.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total_count = self._homogeneous_count("enumerate_support")
        values = T.arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
