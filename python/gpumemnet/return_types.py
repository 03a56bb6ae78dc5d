"""torch.return_types: the named tuples of PyTorch's multi-result ops (max, min, sort, topk, kthvalue, median,
mode, cummax, aminmax, slogdet, svd, ...), the classes gpumemnet's ops return (_core/return_types.py)."""
from ._core.return_types import *  # noqa: F401,F403
from ._core.return_types import __all__  # noqa: F401
