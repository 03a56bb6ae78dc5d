"""torch.autograd.function: Function, its ctx type and the once_differentiable decorator (a user's Function
subclass follows PyTorch's semantics: gpumemnet/_core/custom_function.py)."""
from .._core.autograd import Function
from .._core.custom_function import once_differentiable

FunctionCtx = Function  # the ctx a Function's forward and backward get is its node; annotations name this type
BackwardCFunction = Function

__all__ = ["Function", "FunctionCtx", "once_differentiable"]
