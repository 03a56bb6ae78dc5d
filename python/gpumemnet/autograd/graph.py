"""torch.autograd.graph: saved_tensors_hooks (the core's) and save_on_cpu (_core/offload.py, which sits above the
core's autograd and so is attached here, at the package's face)."""
import collections

from .._core import autograd as _core_autograd
from .._core.autograd import graph as _core_graph
from .._core.offload import save_on_cpu

__all__ = ["saved_tensors_hooks", "save_on_cpu", "register_multi_grad_hook", "Node", "GradientEdge",
           "get_gradient_edge"]

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
