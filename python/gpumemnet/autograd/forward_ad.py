"""torch.autograd.forward_ad: forward-mode automatic differentiation, which gpumemnet does not have (its
torch.func.jvp computes Jacobian-vector products by a double backward instead). Code that only asks whether a
tensor is dual (kornia's morphology: `unpack_dual(t).tangent is None`) runs: no tensor here has a tangent.
Making a dual tensor raises."""
import contextlib
from collections import namedtuple

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])


def unpack_dual(tensor, *, level=None):
    return UnpackedDualTensor(tensor, None)


def make_dual(tensor, tangent, *, level=None):
    raise NotImplementedError("torch.autograd.forward_ad.make_dual: gpumemnet has no forward-mode AD; compute "
                              "Jacobian-vector products with torch.func.jvp or torch.autograd.functional.jvp")


def enter_dual_level():
    return 0


def exit_dual_level(*, level=None):
    pass


@contextlib.contextmanager
def dual_level():
    yield
