"""torch.distributions.Dirichlet."""
from . import _ops as T
from . import constraints
from .distribution import _size
from .exp_family import ExponentialFamily
from .gamma import _standard_gamma
from .utils import _xlogy
from ..nn.functional import one_hot

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution of concentration (..., K): points of the K-simplex.

    rsample draws K independent Gamma(concentration_k, 1) variables and divides by their sum; its gradient is the
    pathwise one through those gamma draws (each by the implicit reparameterization gradient): unbiased, like
    PyTorch's, but PyTorch differentiates the marginal Beta cdf instead, so per-sample gradients differ."""
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if not isinstance(concentration, T.Tensor):
            raise AttributeError(f"Dirichlet: concentration must be a Tensor (it has no dim()), got "
                                 f"{type(concentration).__name__}")
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        g = _standard_gamma(self.concentration.expand(shape))
        x = g / g.sum(-1, keepdim=True)
        return x.clamp(min=T.finfo(x.dtype).tiny)  # no exact 0: log_prob stays finite

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (_xlogy(self.concentration - 1.0, value).sum(-1) + T.lgamma(self.concentration.sum(-1))
                - T.lgamma(self.concentration).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        # every concentration below 1: the density peaks at a vertex, the one of the largest concentration
        mask = (self.concentration < 1).all(dim=-1, keepdim=True)
        vertex = one_hot(mode.argmax(dim=-1), concentrationm1.shape[-1]).to(mode)
        return T.where(mask, vertex, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        k = self.concentration.shape[-1]
        a0 = self.concentration.sum(-1)
        return (T.lgamma(self.concentration).sum(-1) - T.lgamma(a0) - (k - a0) * T.digamma(a0)
                - ((self.concentration - 1.0) * T.digamma(self.concentration)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - T.lgamma(x.sum(-1))
