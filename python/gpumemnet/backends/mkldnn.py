"""gm.backends.mkldnn: PyTorch's oneDNN switch. gpumemnet's CPU kernels are its own and OpenBLAS's, so oneDNN is
not available here; `enabled` is accepted and changes nothing."""
import contextlib

__all__ = ["is_available", "flags", "enabled"]

enabled = True


def is_available():
    return False


@contextlib.contextmanager
def flags(enabled=False, deterministic=False):
    yield
