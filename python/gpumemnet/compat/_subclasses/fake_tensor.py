"""torch._subclasses.fake_tensor (names only: gpumemnet infers shapes on its meta device, not with fake tensors)."""
import contextlib


class FakeTensor:
    """No gpumemnet tensor is one."""


class FakeTensorMode:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("FakeTensorMode: gpumemnet infers shapes with device='meta' tensors instead")


def is_fake(x):
    return False


def unset_fake_temporarily():
    """A context in which no fake mode is active: always so here (a null context)."""
    return contextlib.nullcontext()
