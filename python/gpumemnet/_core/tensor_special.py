"""PyTorch's special and elementwise math beyond tensor_math.py: inverse hyperbolics, lgamma / digamma / erfinv, copysign, heaviside, fmax / fmin, comparisons by name (eq, gt, greater ...), bitwise ops on integer tensors.
Tensor methods in SpecialMethods (a base of Tensor); the gm.* functions in __all__ (gpumemnet/__init__.py imports them)."""

__all__ = []


class SpecialMethods:
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()
