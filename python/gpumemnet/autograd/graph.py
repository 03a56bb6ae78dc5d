"""torch.autograd.graph: saved_tensors_hooks (the core's) and save_on_cpu (_core/offload.py, which sits above the
core's autograd and so is attached here, at the package's face)."""
import collections
import contextlib

from .._core import autograd as _core_autograd
from .._core.autograd import graph as _core_graph
from .._core.offload import save_on_cpu
from .._core.state import state as _state
from .. import _C

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "register_multi_grad_hook", "Node",
           "GradientEdge", "get_gradient_edge", "increment_version"]

GradientEdge = collections.namedtuple("GradientEdge", ("node", "output_nr"))


def get_gradient_edge(tensor):
    """(node, output_nr): where tensor's gradient goes (its grad_fn, or a leaf's gradient accumulator)."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require "
                           "gradients")
    return GradientEdge(*_core_autograd._edge_of(tensor))

saved_tensors_hooks = _core_graph.saved_tensors_hooks
Node = _core_autograd.Node  # the class of every grad_fn (isinstance checks)


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """(spikingjelly imports it.) gpumemnet's engine has no end-of-backward callback to call fn with the gradients
    of all the tensors at once; register a hook on each tensor (Tensor.register_hook) instead."""
    raise NotImplementedError("torch.autograd.graph.register_multi_grad_hook: gpumemnet's autograd engine cannot "
                              "call one hook with several tensors' gradients; use Tensor.register_hook on each")


def increment_version(tensor):
    """Count a write autograd did not see (a kernel of one's own through data_ptr) into the tensor's version (or each
    tensor's, given several): a graph that saved it then refuses to use it, as after an in-place op."""
    for t in (tensor,) if _core_autograd._is_tensor(tensor) else tensor:
        _C._increment_version(t)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Within this context, entering saved_tensors_hooks (or save_on_cpu) raises RuntimeError(error_message)
    (a library whose ops cannot have their saved tensors packed says so)."""
    if not isinstance(error_message, str):
        raise TypeError(f"disable_saved_tensors_hooks: error_message must be a str, got {type(error_message).__name__}")
    prev = _state.saved_hooks_refusal
    _state.saved_hooks_refusal = error_message
    try:
        yield
    finally:
        _state.saved_hooks_refusal = prev
