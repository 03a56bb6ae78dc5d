"""gm.autograd (the package's face, layer 4): PyTorch's torch.autograd names, re-exported from the core.

The engine and Function live in gpumemnet/_core/autograd.py; this module only gives them their public path
(gm.autograd.Function, gm.autograd.grad, gm.autograd.graph.saved_tensors_hooks...)."""
from ._core.autograd import (  # noqa: F401
    Function, backward, grad, no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled, graph)
from ._core.autograd import __all__  # noqa: F401
