"""Stand-ins for PyTorch's infrastructure modules that PyTorch code touches and gpumemnet has no use for.

`torch.jit`, `torch.hub`, `torch.ops`, `torch.library`, `torch.fx`, `torch.compiler` and `torch._C` resolve here
under the alias (gpumemnet/dropin.py). Each does what PyTorch does on a machine where the feature is off or
absent: the JIT is never scripting or tracing, no C++ operator library loads (so torchvision runs without its
optional C++ ops, as where they fail to load), fake-tensor and dispatcher registrations are accepted and
unused (gpumemnet's `meta` device infers shapes in C). They do not claim to do more: what would need the
feature raises an error that says so.

Layer: libraries (imports nothing of gpumemnet's core but what it names).
"""
