"""Dropout layers: active in training mode only; the mask comes from the Philox generator (replayable)."""
from .. import functional as F
from ._utils import _inplace
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability p and scale the rest by 1/(1-p)."""

    def forward(self, input):
        return F.dropout(input, self.p, self.training, _inplace(self, input))


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) with probability p."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, _inplace(self, input))


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) with probability p."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, _inplace(self, input))


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) with probability p."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, _inplace(self, input))


class AlphaDropout(_DropoutNd):
    """Dropout that keeps a SELU activation's mean and variance."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """AlphaDropout of whole channels."""

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)
