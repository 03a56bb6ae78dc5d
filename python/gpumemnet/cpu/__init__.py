"""torch.cpu: the CPU as a device module, for code that reaches it the way it reaches torch.cuda
(`torch.cpu.amp.autocast()`, `torch.cpu.is_available()`, `torch.cpu.synchronize()`). The CPU runs one stream and
every op is complete when it returns, so the stream calls have nothing to wait for."""
import contextlib

from . import amp  # noqa: F401

__all__ = ["amp", "is_available", "device_count", "current_device", "synchronize", "set_device", "Stream",
           "current_stream", "stream"]


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def set_device(device):
    """Accepted, as PyTorch does: there is one CPU device."""


def synchronize(device=None):
    """Every CPU op is complete when it returns: nothing to wait for."""


class Stream:
    """PyTorch's torch.cpu.Stream: a no-op stand-in (the CPU runs one stream)."""

    def __init__(self, priority=-1):
        self.priority = priority

    def wait_stream(self, stream):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True


_DEFAULT = Stream()


def current_stream(device=None):
    return _DEFAULT


@contextlib.contextmanager
def stream(stream):
    yield
