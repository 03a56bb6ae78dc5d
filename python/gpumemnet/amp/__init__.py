"""Mixed precision (layer 2, a library): autocast and GradScaler, PyTorch's torch.amp.

autocast itself lives in the core (_core/autocast.py: Tensor's methods apply its policy); it is re-exported
here. GradScaler is in grad_scaler.py; autocast_mode is PyTorch's module of that name (torch.amp.autocast_mode)."""
from .._core.autocast import (  # noqa: F401
    autocast, is_autocast_enabled, get_autocast_dtype, lower, fp32)
from .grad_scaler import GradScaler  # noqa: F401
from .custom_ops import custom_bwd, custom_fwd  # noqa: F401
from .autocast_mode import is_autocast_available  # noqa: F401

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype", "custom_fwd", "custom_bwd",
           "is_autocast_available"]
