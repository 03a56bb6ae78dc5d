"""torch.functional: the module PyTorch keeps these functions in (`import torch.functional as F`, as blitz does);
each is gpumemnet's own, the one torch.X names."""
import gpumemnet as _gm

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors", "cartesian_prod",
           "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu", "norm", "meshgrid", "pca_lowrank", "split",
           "stft", "svd_lowrank", "tensordot", "unique", "unique_consecutive", "unravel_index"]

globals().update({name: getattr(_gm, name) for name in __all__ if hasattr(_gm, name)})
