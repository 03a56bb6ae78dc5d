"""torch.distributions.LKJCholesky."""
import math

from . import _ops as T
from . import constraints
from .beta import Beta
from .distribution import Distribution, _size
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


def _mvlgamma(x, p):
    """The multivariate log-gamma function of dimension p: p (p - 1) / 4 log(pi) + sum_i lgamma(x - i / 2)."""
    terms = T.stack([T.lgamma(x - i / 2) for i in range(p)], -1)
    return p * (p - 1) / 4 * math.log(math.pi) + terms.sum(-1)


class LKJCholesky(Distribution):
    """The LKJ distribution of dim x dim correlation matrices, over their lower Cholesky factors, with shape
    concentration (1: uniform over correlation matrices). Sampled by the onion method (no rsample)."""
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.shape
        event_shape = (dim, dim)
        # the onion method's Beta marginals, one per row
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = T.arange(self.dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = T.cat([T.zeros(1, dtype=offset.dtype, device=offset.device), offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with T.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = T.randn(tuple(self._extended_shape(sample_shape)), dtype=y.dtype, device=y.device).tril(-1)
            u_hypersphere = u_normal / u_normal.norm(dim=-1, keepdim=True)
            # the first row is e_1: its direction is undefined (0 / 0), set it to 0 before adding the diagonal
            first = T.arange(self.dim, device=y.device).reshape(self.dim, 1) == 0
            u_hypersphere = T.where(first, T.zeros_like(u_hypersphere), u_hypersphere)
            w = y.sqrt() * u_hypersphere
            eps = T.finfo(w.dtype).tiny
            diag_elems = T.clamp(1 - (w ** 2).sum(-1), min=eps).sqrt()
            return w + diag_elems.diag_embed()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = T.arange(2, self.dim + 1, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = (order * diag_elems.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = T.lgamma(alpha) * dm1
        numerator = _mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized_log_pdf - (pi_constant + numerator - denominator)
