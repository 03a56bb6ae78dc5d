"""affine_grid and grid_sample; nn.functional imports __all__."""
from .._core import unsupported as _unsupported

__all__ = ["grid_sample", "affine_grid"]

grid_sample = _unsupported.function("torch.nn.functional.grid_sample")
affine_grid = _unsupported.function("torch.nn.functional.affine_grid")
