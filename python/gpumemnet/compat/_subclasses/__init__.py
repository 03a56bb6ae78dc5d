"""torch._subclasses: PyTorch's tensor subclasses for tracing (fake tensors). gpumemnet's shape-only tensors are its
meta device; no tensor is a FakeTensor (fake_tensor.py)."""
from . import fake_tensor  # noqa: F401
