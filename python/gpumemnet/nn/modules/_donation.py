"""Inference without a second buffer per layer. Under no_grad, the tensor a Sequential passes from one child to
the next is often held by nothing but the loop's own variable. The next child may then write its output over it,
as an in-place ReLU writes over its input, and an eval forward's peak drops by one tensor where a BatchNorm or
an activation runs (MobileNetV2's and the digits CNN's peaks are such moments). PyTorch allocates a new output
there; the values are the same.

Sequential.forward grants a tensor, by id and per thread, only when all of these hold. Each rule stops one way
the overwrite could be seen:
- grad mode is off: with grad on, the tensor may be saved for backward;
- it is not the Sequential's own input: the caller may still hold that (and on CPython versions whose call
  arguments are borrowed references, a reference count cannot tell);
- its reference count is that of an object held by one local variable, and it is the only tensor over its
  storage (no view of it, no alias saved anywhere), the storage is not a NumPy array's (from_numpy: the array
  still reads it), and no two of its elements share memory (an expand() view);
- the child's class reads its input once, before writing (it sets `_may_overwrite_input = forward`); a subclass
  defined outside gpumemnet overrides no method at all (its __call__, its forward, a helper such as BatchNorm's
  _check_input_dim might keep the input) but __init__ and the like, and the instance has no forward of its own
  (module.forward = ..., as LoRA patches and recorders set it);
- the child has no forward hooks and no global ones are registered: a hook may keep the input;
- no function of nn.functional stands replaced (functional._Watched): a replacement sees the calls PyTorch
  makes, with inplace=False and whole batches.
The child takes the grant when it reads it (`granted`); the Sequential clears it after the call whatever
happens, so an id reused by a later tensor is never found granted.

Who takes a grant: BatchNorm in eval and the activations write in place; a Sequential passes it on to its own
first child; Conv2d and Linear whose output has the input's shape (a UNet's or VGG's second conv of a block,
an MLP's hidden layers) compute slice by slice along the batch and write each slice's result over the slice it
read (`over_slices`), so the whole output never exists beside the input: the layer's peak drops from two
tensors to one and a slice."""
import sys

from ... import _C
from ..._core.autocast import is_autocast_enabled
from ..._core.state import state
from .. import functional as _F
from ._hooks import _fn
from .module import Module as _Module


def _refs_of_a_sole_local():
    x = object()
    return sys.getrefcount(x)


# Measured, not assumed: what getrefcount says of an object one local variable holds differs between CPython
# versions (3.14 borrows the reference its argument passes).
SOLE_LOCAL_REFS = _refs_of_a_sole_local()


def may_overwrite(module, x, global_hooks):
    """Whether module may write its output over x (the rules above; the caller checked grad mode, the reference
    count and that x is not its own input)."""
    cls = type(module)
    ok = _classes.get(cls)
    if ok is None:
        ok = _classes[cls] = _class_may_overwrite(cls)
    return (ok and "forward" not in module.__dict__ and not _F.__class__.replaced
            and not (module._forward_pre_hooks or module._forward_hooks or _input_keeping(global_hooks))
            and isinstance(x, _C.TensorBase) and x._storage_refs == 1 and not x.requires_grad and not x._borrowed
            and (x.is_contiguous() or _distinct(x)))


def _input_keeping(global_hooks):
    """Whether a global hook may keep a module's input: any but those marked `_keeps_no_input` (the watcher of
    `python -m gpumemnet run`, whose estimate must not change the run's own memory)."""
    return any(not getattr(_fn(e), "_keeps_no_input", False) for hooks in global_hooks for e in hooks)


_classes = {}  # class -> _class_may_overwrite(class)
# what a subclass may define and still be granted: none of these sees a forward's input
_HARMLESS = frozenset(("__init__", "extra_repr", "reset_parameters", "__repr__", "__setstate__", "__getstate__",
                       "_load_from_state_dict", "__init_subclass__"))


def _class_may_overwrite(cls):
    """Whether a class's modules read their input once, before writing: gpumemnet's classes that say so, and
    subclasses of them, made elsewhere, that define no other method than _HARMLESS ones."""
    opted = getattr(cls, "_may_overwrite_input", None)
    if opted is None or opted is not cls.forward or cls.__call__ is not _Module.__call__:
        return False
    return all(c.__module__.startswith("gpumemnet.") or
               not any(callable(v) or isinstance(v, (staticmethod, classmethod, property))
                       for k, v in vars(c).items() if k not in _HARMLESS and k != "_may_overwrite_input")
               for c in cls.__mro__ if issubclass(c, _Module))


def _distinct(x):
    """Whether no two elements of x share memory (a permuted dense tensor: yes; an expand() view: no)."""
    expected = 1
    for stride, size in sorted((st, sz) for st, sz in zip(x.stride(), x.shape) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def grant(x):
    state.overwritable = id(x)


def revoke():
    state.overwritable = None


def granted(x):
    """Whether the running Sequential handed x over to be overwritten; the grant is used up by asking."""
    if state.overwritable is not None and state.overwritable == id(x):
        state.overwritable = None
        return True
    return False


# over_slices cuts a tensor into at most this many slices, none smaller than SLICE_BYTES (a tensor under two such
# slices is not cut at all). Convolutions over fewer items run less efficiently: the UNet's eval forward (batch 16,
# seven 4 MiB convs cut) took 31 ms uncut, 32 ms in 2 slices, 35 ms in 4 and 40 ms in 8 (its peak 22.0, 20.5,
# 19.0 and 18.5 MiB): 4 keeps most of the saving for an eighth more time.
MAX_SLICES = 4
SLICE_BYTES = 256 << 10


def over_slices(x, fn):
    """fn(x) for a layer whose result item i depends on input item i alone and has x's shape, dtype and device,
    computed over slices of x's first dim, each result written over the slice it was computed from; None where
    this does not pay (a small tensor) or cannot hold (autocast changes the dtype; a result of another shape or
    dtype), and the caller computes fn(x) as usual."""
    n = x.shape[0] if x.ndim else 0
    slices = min(n, MAX_SLICES, x.numel() * x.element_size() // SLICE_BYTES)
    if slices < 2 or is_autocast_enabled(x.device.type) or not x.is_contiguous():
        return None
    step = -(-n // slices)
    for i in range(0, n, step):
        part = x[i:i + step]
        out = fn(part)
        if out.shape != part.shape or out.dtype != x.dtype or out.device != x.device:
            if i:  # the earlier slices are overwritten: not reachable while the callers check the shape first
                raise RuntimeError(f"over_slices: a slice's result is {tuple(out.shape)} {out.dtype}, not the "
                                   f"input's {tuple(part.shape)} {x.dtype}")
            return None
        part.copy_(out)
        del out
    return x
