"""torch.utils.deterministic: the flag fill_uninitialized_memory (PyTorch's: whether, under
use_deterministic_algorithms(True), empty tensors are filled with NaN or the integer maximum). gpumemnet keeps the
setting so that code which sets it (ultralytics' init_seeds sets False) reads back what it set; gpumemnet's empty
tensors are not filled either way."""
import sys
import types

_fill = [True]  # PyTorch's default


class _Deterministic(types.ModuleType):
    """This module's class, so that the flag is a property of the module (a write is checked, and reads see it)."""

    @property
    def fill_uninitialized_memory(self):
        return _fill[0]

    @fill_uninitialized_memory.setter
    def fill_uninitialized_memory(self, mode):
        if not isinstance(mode, bool):
            raise RuntimeError(f"expected a bool, but got {type(mode).__name__}")
        _fill[0] = mode


sys.modules[__name__].__class__ = _Deterministic
