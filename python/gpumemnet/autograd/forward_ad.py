"""torch.autograd.forward_ad: Jacobian-vector products through dual tensors, with PyTorch's API (dual_level,
make_dual, unpack_dual), computed on gpumemnet's reverse-mode autograd.

gpumemnet has no forward-mode engine. make_dual(t, tangent) gives an alias of t that autograd tracks (a new leaf
when t needs no grad) and remembers its tangent in the current level; unpack_dual(y) finds y's tangent by the
double-vjp trick of torch.func.jvp: u -> J^T u (a backward of y with create_graph) is linear in u, and its
gradient along the tangents is J @ tangent. The values are forward mode's; the cost is two backward passes per
unpack, and the ops between run with grad enabled (dual_level turns it on). Differences that show: a dual of a
tensor that needs no grad requires grad (its results do too), and a tensor's repr has no `tangent=`. Code that only asks whether a
tensor is dual (kornia's morphology: `unpack_dual(t).tangent is None`) gets None outside a level."""
import contextlib
from collections import namedtuple

from .._core.autograd import enable_grad
from .._core.tensor import Tensor
from .._func_transforms import jacobian_vector

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_levels = []  # one list of (dual tensor, tangent) per entered level, innermost last


def enter_dual_level():
    """Open a new level (the innermost); returns its index."""
    _levels.append([])
    return len(_levels) - 1


def exit_dual_level(*, level=None):
    """Close the innermost level: its dual tensors lose their tangents."""
    if not _levels or (level is not None and level != len(_levels) - 1):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. This is "
                           "not supported.")
    _levels.pop()


@contextlib.contextmanager
def dual_level():
    """A level, inside which grad mode is on: the tangents are read off the graph of the ops between, which PyTorch
    computes whatever the grad mode (`with torch.no_grad(), dual_level():` in evaluation code)."""
    level = enter_dual_level()
    try:
        with enable_grad():
            yield level
    finally:
        exit_dual_level(level=level)


def _level(level, what):
    if not _levels:
        raise RuntimeError(f"Trying to {what} but no level exists, make sure to enter_dual_level() first.")
    if level is None:
        return _levels[-1]
    if not 0 <= level < len(_levels):
        raise RuntimeError(f"forward_ad: level {level} does not exist ({len(_levels)} are open)")
    return _levels[level]


def make_dual(tensor, tangent, *, level=None):
    """A dual tensor of primal `tensor` and `tangent` (same shape) in the level (the innermost by default)."""
    duals = _level(level, "create a dual Tensor for forward AD")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError(f"make_dual: expected two tensors, got {type(tensor).__name__} and {type(tangent).__name__}")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    if not tensor.is_floating_point():
        raise ValueError(f"make_dual: expected a floating point primal, got {tensor.dtype}")
    dual = tensor.view_as(tensor) if tensor.requires_grad else tensor.detach().requires_grad_(True)
    duals.append((dual, tangent))
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of tensor in the level: tangent None where tensor does not depend on a dual tensor."""
    if not _levels or not isinstance(tensor, Tensor) or not tensor.requires_grad:
        return UnpackedDualTensor(tensor, None)
    duals = _level(level, "unpack a dual Tensor")
    for d, t in duals:
        if d is tensor:
            return UnpackedDualTensor(tensor, t)
    if not duals or not tensor.is_floating_point():
        return UnpackedDualTensor(tensor, None)
    # None where tensor was built from no dual tensor, as in PyTorch
    return UnpackedDualTensor(tensor, jacobian_vector(tensor, [d for d, _ in duals], [t for _, t in duals]))
