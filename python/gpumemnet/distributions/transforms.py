"""torch.distributions.transforms: invertible maps with a log-Jacobian, for TransformedDistribution. The
elementwise ones and the base class are in _transforms_base.py, the structured ones in _transforms_more.py."""
from ._transforms_base import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,  # noqa: F401
                               PowerTransform, SigmoidTransform, SoftplusTransform, TanhTransform, Transform,
                               _InverseTransform, _clipped_sigmoid, identity_transform)
from ._transforms_more import (CatTransform, CorrCholeskyTransform, CumulativeDistributionTransform,  # noqa: F401
                               IndependentTransform, LowerCholeskyTransform, PositiveDefiniteTransform,
                               ReshapeTransform, SoftmaxTransform, StackTransform, StickBreakingTransform)

__all__ = ["AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform", "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "ExpTransform", "IndependentTransform", "LowerCholeskyTransform",
           "PositiveDefiniteTransform", "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
           "SoftplusTransform", "StackTransform", "StickBreakingTransform", "TanhTransform", "Transform",
           "identity_transform"]
