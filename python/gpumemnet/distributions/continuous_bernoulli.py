"""torch.distributions.ContinuousBernoulli."""
import math
from numbers import Number

from . import _ops as T
from . import constraints
from .distribution import _all_true, _size
from .exp_family import ExponentialFamily
from .utils import (broadcast_all, clamp_probs, expand_probs_or_logits, lazy_property, logits_to_probs,
                    probs_to_logits)
from ..nn.functional import binary_cross_entropy_with_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli distribution on [0, 1]: density proportional to probs^x (1 - probs)^(1 - x).
    Give exactly one of probs and logits. Near probs = 1/2 (inside lims) the normalizer and moments use their
    Taylor expansions, as PyTorch's."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            # validate before clamping (the clamped values would always pass)
            if validate_args is not None and not _all_true(self.arg_constraints["probs"].check(self.probs)):
                raise ValueError(f"The parameter probs has invalid values: {self.probs}")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self._lims = lims
        super().__init__(() if is_scalar else self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = _size(batch_shape, "batch_shape")
        expand_probs_or_logits(new, self, batch_shape)
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return T.where(self._outside_unstable_region(), self.probs, self._lims[0] * T.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """The log normalizing constant, its Taylor expansion near probs = 1/2."""
        cut_probs = self._cut_probs()
        below = T.where(cut_probs <= 0.5, cut_probs, T.zeros_like(cut_probs))
        above = T.where(cut_probs >= 0.5, cut_probs, T.ones_like(cut_probs))
        log_norm = (T.log(T.abs(T.log1p(-cut_probs) - T.log(cut_probs)))
                    - T.where(cut_probs <= 0.5, T.log1p(-2.0 * below), T.log(2.0 * above - 1.0)))
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return T.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (T.log1p(-cut_probs) - T.log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return T.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return T.sqrt(self.variance)

    @property
    def variance(self):
        cut_probs = self._cut_probs()
        vars_ = (cut_probs * (cut_probs - 1.0) / (1.0 - 2.0 * cut_probs).pow(2)
                 + 1.0 / (T.log1p(-cut_probs) - T.log(cut_probs)).pow(2))
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return T.where(self._outside_unstable_region(), vars_, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return T.Size(self._param.shape)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        u = T.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        with T.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        u = T.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = (cut_probs.pow(value) * (1.0 - cut_probs).pow(1.0 - value) + cut_probs - 1.0) / (2.0 * cut_probs - 1.0)
        unbounded_cdfs = T.where(self._outside_unstable_region(), cdfs, value)
        return T.where(value <= 0.0, T.zeros_like(value),
                       T.where(value >= 1.0, T.ones_like(value), unbounded_cdfs))

    def icdf(self, value):
        cut_probs = self._cut_probs()
        inside = ((T.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0)) - T.log1p(-cut_probs))
                  / (T.log(cut_probs) - T.log1p(-cut_probs)))
        return T.where(self._outside_unstable_region(), inside, value)

    def entropy(self):
        log_probs0 = T.log1p(-self.probs)
        log_probs1 = T.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        out_unst_reg = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut_nat_params = T.where(out_unst_reg, x, (self._lims[0] - 0.5) * T.ones_like(x))
        log_norm = T.log(T.abs(T.expm1(cut_nat_params))) - T.log(T.abs(cut_nat_params))
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return T.where(out_unst_reg, log_norm, taylor)
