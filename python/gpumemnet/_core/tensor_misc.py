"""PyTorch's the rest of PyTorch's Tensor surface: in-place random fills (random_, exponential_ ...), metadata queries (get_device, is_signed, retains_grad ...), ravel, broadcast_to, split_with_sizes, masked_scatter, scatter_reduce, mode, nanmedian, renorm, isin, column_stack ....
Tensor methods in MiscMethods (a base of Tensor); the gm.* functions in __all__ (gpumemnet/__init__.py imports them)."""

__all__ = []


class MiscMethods:
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()
