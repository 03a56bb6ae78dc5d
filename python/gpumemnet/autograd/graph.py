"""torch.autograd.graph: saved_tensors_hooks (the core's) and save_on_cpu (_core/offload.py, which sits above the
core's autograd and so is attached here, at the package's face)."""
from .._core.autograd import graph as _core_graph
from .._core.offload import save_on_cpu

__all__ = ["saved_tensors_hooks", "save_on_cpu"]

saved_tensors_hooks = _core_graph.saved_tensors_hooks
