"""torch.torch_version: TorchVersion, the str subclass torch.__version__ is, comparing as a version with strings
and tuples (torch.__version__ >= "2.0", >= (2, 0)): tabpfn imports it."""
import re

__all__ = ["TorchVersion"]


def _parts(v):
    """The leading release numbers of a version (a string, TorchVersion or tuple), as a tuple of ints."""
    if isinstance(v, tuple):
        return tuple(int(x) for x in v)
    m = re.match(r"\d+(\.\d+)*", str(v))
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


class TorchVersion(str):
    def _cmp(self, other):
        a, b = _parts(self), _parts(other)
        n = max(len(a), len(b))
        a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
        return (a > b) - (a < b)

    def __lt__(self, other):
        return self._cmp(other) < 0

    def __le__(self, other):
        return self._cmp(other) <= 0

    def __gt__(self, other):
        return self._cmp(other) > 0

    def __ge__(self, other):
        return self._cmp(other) >= 0

    def __eq__(self, other):
        return str.__eq__(self, other) if isinstance(other, str) and not _parts(other) else self._cmp(other) == 0

    __hash__ = str.__hash__
