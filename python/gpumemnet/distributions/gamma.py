"""torch.distributions.Gamma, and the reparameterized standard-gamma draw the gamma family shares."""
from numbers import Number

from . import _ops as T
from . import _samplers
from . import constraints
from .distribution import _size
from .exp_family import ExponentialFamily
from .utils import _xlogy, broadcast_all
from .._core.autograd import Function

__all__ = ["Gamma"]


def _standard_gamma_grad(alpha, x):
    """dx/dalpha of a Gamma(alpha, 1) draw x at fixed cdf value (the implicit reparameterization gradient):
    -(dP(alpha, x)/dalpha) / pdf(x), P the regularized lower incomplete gamma function. With
    P = x^alpha e^-x / Gamma(alpha + 1) * S, S = sum_n t_n, t_n = x^n / ((alpha + 1)...(alpha + n)), it is
    -(x / alpha) (S (log x - digamma(alpha + 1)) - sum_n t_n H_n), H_n = sum_{k <= n} 1 / (alpha + k): exact up to
    the series' truncation (float64), where PyTorch evaluates approximations of the same quantity."""
    a = alpha.to(T.float64)
    x = x.to(T.float64)
    if x.device.type == "meta":  # no values: the shape is all there is
        return T.empty(tuple(x.shape), dtype=T.float64, device=x.device)
    t = T.ones_like(x)
    s = T.ones_like(x)
    h = T.zeros_like(x)
    th = T.zeros_like(x)
    n = 0
    while True:
        n += 1
        t = t * x / (a + n)
        h = h + 1.0 / (a + n)
        s = s + t
        th = th + t * h
        # the terms fall once n > x - alpha; stop when the last is negligible everywhere
        if n % 16 == 0 and not bool(((t * (1 + h)) > 1e-17 * (s + th)).any()):
            break
    return -(x / a) * (s * (x.log() - T.digamma(a + 1)) - th)


class _StandardGamma(Function):
    """A Gamma(alpha, 1) draw, differentiable in alpha by the implicit reparameterization gradient (on meta: an
    empty tensor of the shape, in the graph as on the other devices)."""

    @staticmethod
    def forward(ctx, alpha):
        x = _samplers.standard_gamma(alpha).to(alpha.dtype)
        x = x.clamp(min=T.finfo(alpha.dtype).tiny)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, g):
        alpha, x = ctx._unpacked
        with T.no_grad():
            d = _standard_gamma_grad(alpha.detach(), x.detach()).to(alpha.dtype)
        return g * d


def _standard_gamma(alpha):
    """Gamma(alpha, 1) samples of alpha's shape, reparameterized (gradient flows to alpha)."""
    return _StandardGamma.apply(alpha)


class Gamma(ExponentialFamily):
    """The gamma distribution of shape concentration and rate rate (mean concentration / rate)."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, Number) and isinstance(rate, Number):
            batch_shape = ()
        else:
            batch_shape = self.concentration.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Gamma, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        value = _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=T.finfo(value.dtype).tiny)  # a draw of 0 would have log_prob -inf

    def log_prob(self, value):
        value = T.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (_xlogy(self.concentration, self.rate) + _xlogy(self.concentration - 1, value)
                - self.rate * value - T.lgamma(self.concentration))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        from ..special import gammainc  # (a sibling library: imported when used)
        return gammainc(self.concentration, self.rate * value)

    def entropy(self):
        return (self.concentration - T.log(self.rate) + T.lgamma(self.concentration)
                + (1.0 - self.concentration) * T.digamma(self.concentration))

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return T.lgamma(x + 1) + (x + 1) * T.log(-y.reciprocal())

