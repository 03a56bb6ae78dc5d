"""PyTorch's products and matrix helpers: kron, inner, mv, addmm / addmv / addr / baddbmm / addbmm, vdot, block_diag, cartesian_prod, combinations, diag_embed, diagflat, cov, corrcoef, cross.
Tensor methods in ProductMethods (a base of Tensor); the gm.* functions in __all__ (gpumemnet/__init__.py imports them)."""

__all__ = []


class ProductMethods:
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()
