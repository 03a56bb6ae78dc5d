"""torch.distributions.HalfCauchy."""
import math

from . import _ops as T
from ._half import Half
from .cauchy import Cauchy

__all__ = ["HalfCauchy"]


class HalfCauchy(Half):
    """|X| for X ~ Cauchy(0, scale)."""
    _base = Cauchy

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return T.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance
