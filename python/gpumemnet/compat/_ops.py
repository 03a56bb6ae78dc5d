"""torch._ops: the classes behind torch.ops (OpOverload, OpOverloadPacket) and PyTorch's higher-order operators,
which libraries subclass at import (spikingjelly's flexsn). gpumemnet has no dispatcher to register them with:
a higher-order operator raises when called."""
from .ops import _Op as OpOverload  # noqa: F401

__all__ = ["HigherOrderOperator", "OpOverload", "OpOverloadPacket", "ops"]

OpOverloadPacket = OpOverload


class HigherOrderOperator:
    def __init__(self, name, *args, **kwargs):
        self._name = self.__name__ = name

    def py_impl(self, key):
        return lambda fn: fn

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"torch._ops.HigherOrderOperator {self._name!r}: gpumemnet has no dispatcher "
                                  f"to run higher-order operators")


from . import ops  # noqa: E402  (torch._ops.ops is torch.ops)
