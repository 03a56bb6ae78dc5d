"""torch._dynamo: PyTorch's graph compiler. gpumemnet never compiles, so code asking whether it is being compiled
is told no, and decorators that steer the compiler return what they decorate."""
from ..compiler import allow_in_graph, assume_constant_result, disable, is_compiling, reset
from . import config  # noqa: F401
from .eval_frame import OptimizedModule  # noqa: F401

__all__ = ["allow_in_graph", "assume_constant_result", "disable", "is_compiling", "mark_dynamic", "mark_static",
           "reset"]


def mark_dynamic(*args, **kwargs):
    pass


mark_static = mark_dynamic
