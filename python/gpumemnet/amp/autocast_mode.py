"""torch.amp.autocast_mode: autocast, custom_fwd / custom_bwd and is_autocast_available under PyTorch's module
name (code imports them from here, and checks is_autocast_available before it opens a region)."""
from .._core.autocast import autocast, check_device_type  # noqa: F401
from .custom_ops import custom_bwd, custom_fwd  # noqa: F401

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available"]

# PyTorch's answer is True for every device type it has an autocast policy for, built in or not (xpu, mps...):
# a library asks it to choose between autocast(device) and a null context, not whether the device exists.
_AVAILABLE = ("cpu", "cuda", "ipu", "xpu", "hpu", "mps", "xla", "mtia", "maia", "privateuseone")


def is_autocast_available(device_type):
    """Whether autocast has a policy for device_type (a str naming a device type, as PyTorch's)."""
    return check_device_type(device_type, "is_autocast_available") in _AVAILABLE
