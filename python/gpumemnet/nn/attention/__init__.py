"""torch.nn.attention: choosing scaled_dot_product_attention's kernel. gpumemnet has one implementation (the math
one, functional.scaled_dot_product_attention), so every backend choice runs it: sdpa_kernel is accepted as
PyTorch's context manager and changes nothing, and a choice that excludes MATH still runs it (PyTorch would fall
back or refuse by what the hardware has)."""
import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel"]

from . import flex_attention  # noqa: E402,F401  (torch.nn.attention.flex_attention)


class SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    backends = [backends] if isinstance(backends, SDPBackend) else list(backends)
    if not all(isinstance(b, SDPBackend) for b in backends):
        raise ValueError(f"sdpa_kernel: backends must be SDPBackend values, got {backends!r}")
    yield
