"""torch.distributions.StudentT."""
import math

from . import _ops as T
from . import constraints
from .chi2 import Chi2
from .distribution import Distribution, _size
from .utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t distribution of df degrees of freedom, location loc and scale scale. rsample is
    X / sqrt(Z / df) for X normal and Z ~ Chi2(df), reparameterized through both."""
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self):
        return T.where(self.df <= 1, T.full_like(self.loc, math.nan), self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        big = df > 2
        safe = T.where(big, df, T.full_like(df, 3.0))  # no division by df - 2 <= 0 in the unused branch
        m = T.where(big, self.scale.pow(2) * safe / (safe - 2), df)
        m = T.where((df <= 2) & (df > 1), T.full_like(m, math.inf), m)
        return T.where(df <= 1, T.full_like(m, math.nan), m)

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        super(StudentT, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        X = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        Z = self._chi2.rsample(sample_shape)
        Y = X * (Z / self.df).rsqrt()
        return self.loc + self.scale * Y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + T.lgamma(0.5 * self.df)
             - T.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * T.log1p(y ** 2.0 / self.df) - Z

    def entropy(self):
        lbeta = T.lgamma(0.5 * self.df) + math.lgamma(0.5) - T.lgamma(0.5 * (self.df + 1))
        return (self.scale.log() + 0.5 * (self.df + 1) * (T.digamma(0.5 * (self.df + 1)) - T.digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)
