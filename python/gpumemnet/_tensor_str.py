"""torch._tensor_str: the printing module PyTorch keeps a tensor's text in; libraries with tensor-like classes
reuse it for their own repr (PyTorch Geometric's Index and EdgeIndex: _tensor_str(t, indent) for the values,
_add_suffixes for ", dtype=..." and the closing parenthesis). gpumemnet's printing is _core/tensor_str.py."""
import contextlib

from ._core import tensor_str as _impl
from ._core.tensor_str import PRINT_OPTS, set_printoptions

__all__ = ["PRINT_OPTS", "set_printoptions", "get_printoptions", "printoptions"]


def get_printoptions():
    """The current print settings, as a dict (PyTorch's keys)."""
    return {k: getattr(PRINT_OPTS, k) for k in ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")}


@contextlib.contextmanager
def printoptions(**kwargs):
    """set_printoptions(**kwargs) for the block, the previous settings restored after it."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


def _tensor_str(self, indent):
    """The bracketed values of a tensor as its repr prints them, rows indented by `indent` after the first."""
    if self.device.type == "meta":
        return "..."
    if self.numel() == 0:
        return "[]"
    return _impl.values_str(self.detach(), indent)


def _add_suffixes(tensor_str, suffixes, indent, force_newline):
    """tensor_str + ", suffix" for each (a new line where linewidth would be passed, or before each with
    force_newline) + ")"."""
    if force_newline:
        return tensor_str + "".join(",\n" + " " * indent + s for s in suffixes) + ")"
    return _impl.with_suffixes(tensor_str, suffixes, indent)


def _str(self, *, tensor_contents=None):
    return repr(self)
