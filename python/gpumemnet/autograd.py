"""gm.autograd (the package's face, layer 4): PyTorch's torch.autograd names, re-exported from the core.

The engine and Function live in gpumemnet/_core/autograd.py; this module only gives them their public path
(gm.autograd.Function, gm.autograd.grad, gm.autograd.graph.saved_tensors_hooks, graph.save_on_cpu...)."""
from ._core.autograd import (  # noqa: F401
    Function, backward, grad, no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled)
from ._core.autograd import __all__  # noqa: F401
from ._core.autograd import graph as _core_graph
from ._core.offload import save_on_cpu as _save_on_cpu


class graph(_core_graph):
    """torch.autograd.graph: saved_tensors_hooks (the core's) and save_on_cpu (_core/offload.py, which sits above
    the core's autograd and so is attached here, at the package's face)."""
    save_on_cpu = _save_on_cpu
