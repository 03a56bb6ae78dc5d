"""torch.fx.experimental.symbolic_shapes: symbolic sizes of traced programs. gpumemnet's sizes are plain ints, so
every size is statically known and the guards are the values themselves (transformers imports the exception)."""

__all__ = ["GuardOnDataDependentSymNode", "guard_size_oblivious", "statically_known_true", "definitely_true",
           "definitely_false", "is_concrete_int"]


class GuardOnDataDependentSymNode(RuntimeError):
    """Raised by PyTorch's tracer on a branch over a data-dependent size; never raised here."""


def guard_size_oblivious(expr):
    return bool(expr)


def statically_known_true(expr):
    return bool(expr)


def definitely_true(expr):
    return bool(expr)


def definitely_false(expr):
    return not bool(expr)


def is_concrete_int(a):
    return isinstance(a, int)
