"""The tensor functions the distributions compose (a layer-2 package cannot import the package root)."""
from .._core.activation import sigmoid, softmax, log_softmax  # noqa: F401
from .._core.autograd import enable_grad, grad, is_grad_enabled, no_grad  # noqa: F401
from .._core.creation import (abs, arange, as_tensor, cat, clamp, diagonal, empty,  # noqa: F401
                              erf, erfc, exp, expm1, eye, flip, full, full_like, isclose, is_tensor, log, log1p, logit,
                              logsumexp, ones, ones_like, rand, randn, sqrt, stack, tensor, tril, where, xlogy,
                              zeros, zeros_like)
from .._core.creation_more import broadcast_shapes, broadcast_tensors, broadcast_to, multinomial  # noqa: F401
from .._core.dtype import finfo, get_default_dtype, float32, float64, int64, bool_  # noqa: F401
from .._core.tensor import Tensor  # noqa: F401
from .._core.tensor_misc import bernoulli  # noqa: F401
from .._core.size import Size  # noqa: F401
from .._core.tensor_solve import cholesky_inverse, cholesky_solve  # noqa: F401
from .._core.tensor_special import atanh, digamma, erfinv, lgamma  # noqa: F401
