"""torch.distributions.HalfNormal."""
import math

from ._half import Half
from .normal import Normal

__all__ = ["HalfNormal"]


class HalfNormal(Half):
    """|X| for X ~ Normal(0, scale)."""
    _base = Normal

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)
