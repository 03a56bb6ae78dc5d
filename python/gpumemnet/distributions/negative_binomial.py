"""torch.distributions.NegativeBinomial."""
from . import _ops as T
from . import _samplers
from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from ._count_probs import expand_count_and_probs_or_logits, set_count_and_probs_or_logits
from .utils import lazy_property, logits_to_probs, probs_to_logits
from ..nn.functional import logsigmoid

__all__ = ["NegativeBinomial"]


class NegativeBinomial(Distribution):
    """The number of successes of Bernoulli(probs) trials before total_count failures. Give exactly one of
    probs and logits. Sampled as Poisson(Gamma(total_count, exp(-logits)))."""
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        super().__init__(set_count_and_probs_or_logits(self, total_count, probs, logits), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return expand_count_and_probs_or_logits(NegativeBinomial, self, batch_shape, _instance)

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    @property
    def mean(self):
        return self.total_count * T.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / T.sigmoid(-self.logits)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return T.Size(self._param.shape)

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=T.exp(-self.logits), validate_args=False)

    def sample(self, sample_shape=()):
        with T.no_grad():
            rate = self._gamma.sample(sample_shape=sample_shape)
            return _samplers.poisson(rate).to(rate.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = self.total_count * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        log_normalization = (-T.lgamma(self.total_count + value) + T.lgamma(1.0 + value)
                             + T.lgamma(self.total_count))
        # total_count + value == 0: the probability of no success and no failure needed is 1
        log_normalization = T.where(self.total_count + value == 0.0, T.zeros_like(log_normalization),
                                    log_normalization)
        return log_unnormalized_prob - log_normalization
