"""The allocator's category and scope as context managers (layer 1, core).

Every allocation is tagged with the current category (parameter, gradient, optimizer, activation,
activation_grad, workspace, input, communication, other: each defined in csrc/gm.h and gm.memory.CATEGORY_DOCS) and scope (e.g. 'features.3 forward'); both are per thread in C (csrc/allocator.c). The libraries
tag what they allocate with these (the optimizer's state, a data loader's batches); gpumemnet.memory re-exports
them for users."""
import contextlib

from .. import _C

__all__ = ["category", "scope"]


@contextlib.contextmanager
def category(name):
    """Tag allocations made inside the block with a category (parameter, gradient, optimizer, activation,
    activation_grad, workspace, input, communication, other)."""
    prev = _C.set_category(name)
    try:
        yield
    finally:
        _C.set_category(prev)


@contextlib.contextmanager
def scope(name):
    """Name the allocations made inside the block (e.g. 'features.3 forward') for reports and errors."""
    prev = _C.set_scope(name)
    try:
        yield
    finally:
        _C.set_scope(prev)
