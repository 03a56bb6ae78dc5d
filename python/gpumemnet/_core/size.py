"""gpumemnet.Size (torch.Size): the type of `Tensor.shape` and `Tensor.size()`, a tuple of dim sizes.

It is a tuple: it compares and hashes as the tuple of its ints, so `x.shape == (2, 3)` holds. As torch.Size, a
slice of it, `size + tuple`, `tuple + size` and `size * n` are Sizes; `numel()` is the product of the sizes.

Two halves (csrc/tensor_type.c explains why): this Python class is the public type (its constructor's checks,
numel, repr, pickling); its C base `_C.SizeBase` holds what must stay as fast as a tuple's (indexing, + and *),
and C makes the instances `shape` returns directly, without calling this class, once _core/tensor.py has
registered it (`_C._set_size_class`, next to the Tensor class)."""
import math
import operator

from .. import _C
from . import dtype as _dtype

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE


def _type_name(obj):
    """The name PyTorch's messages give a type (its C tp_name): 'str', 'Tensor', 'numpy.float64'."""
    tp = type(obj)
    if tp.__flags__ & _HEAPTYPE or tp.__module__ == "builtins":
        return tp.__name__
    return f"{tp.__module__}.{tp.__name__}"


def _as_size_item(s, i):
    """One dim size as an int: an int, a bool, or anything with __index__ (a one-element integer tensor too)."""
    if type(s) is not int:
        try:
            s = operator.index(s)
        except TypeError:
            raise TypeError(f"torch.Size() takes an iterable of 'int' (item {i} is '{_type_name(s)}')") from None
    if not _INT64_MIN <= s <= _INT64_MAX:
        raise ValueError("Overflow when unpacking long long")
    return int(s)


class Size(_C.SizeBase):
    """torch.Size: the sizes of a tensor's dims, a tuple of ints. `Size([2, 3])`, from any iterable of ints."""
    __slots__ = ()  # no __dict__: C allocates instances of exactly the size of a tuple (_set_size_class checks)

    def __new__(cls, *args, **kwargs):
        if kwargs:  # PyTorch's: tuple's own errors
            raise TypeError("tuple() takes no keyword arguments")
        if len(args) > 1:
            raise TypeError(f"tuple expected at most 1 argument, got {len(args)}")
        return super().__new__(cls, [_as_size_item(s, i) for i, s in enumerate(args[0] if args else ())])

    def numel(self):
        """The number of elements of a tensor of this size (1 for Size([]))."""
        return math.prod(self)

    def __repr__(self):
        # as the dtypes print: gpumemnet.Size([2, 3]), or torch.Size([2, 3]) under the drop-in alias
        return f"{_dtype.DISPLAY[0]}.Size({list(self)})"

    def __reduce__(self):
        return (Size, (tuple(self),))

