"""torch.compile's wrapper of a module (gpumemnet runs eagerly: the wrapper only keeps PyTorch's state_dict keys
and attribute forwarding)."""
from .module import Module


class OptimizedModule(Module):
    """What torch.compile(module) returns (gpumemnet.compile): the module as its one child, `_orig_mod`, run as it
    is. Attributes it lacks are the module's (a compiled model's generate(), config, ...), as PyTorch's wrapper
    forwards them."""

    def __init__(self, mod):
        super().__init__()
        self._orig_mod = mod

    def forward(self, *args, **kwargs):
        return self._orig_mod(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "_orig_mod":
                raise
            return getattr(self._orig_mod, name)
