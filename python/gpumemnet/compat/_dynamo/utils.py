"""torch._dynamo.utils: torchvision asks `is_compile_supported(device_type)` to choose between a compiled and an
eager path; nothing is compiled here. warn_once: a warning given once per message (torchao imports it)."""
import warnings

_warned = set()


def warn_once(msg, stacklevel=1):
    if msg not in _warned:
        _warned.add(msg)
        warnings.warn(msg, stacklevel=stacklevel + 1)


def is_compile_supported(device_type):
    return False
