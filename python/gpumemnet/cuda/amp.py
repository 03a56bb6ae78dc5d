"""torch.cuda.amp's spelling, for code written against it (story 002: `from torch.cuda.amp import autocast,
GradScaler`, `with torch.cuda.amp.autocast():`): autocast for CUDA ops, float16 by default, and the GradScaler of
gpumemnet.amp. The current names are gm.autocast("cuda", ...) and gm.amp.GradScaler("cuda", ...), as in PyTorch,
which deprecates torch.cuda.amp; these stay quiet rather than warn about that. On a machine without CUDA both
warn and disable themselves, as PyTorch's do (autocast runs the region in full precision, the scaler scales
nothing)."""

from .. import amp as _amp
from .._core.dtype import float16

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def custom_fwd(fwd=None, *, cast_inputs=None):
    """torch.cuda.amp.custom_fwd: gm.amp.custom_fwd for CUDA."""
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    return _amp.custom_bwd(bwd, device_type="cuda")


class autocast(_amp.autocast):
    """gm.autocast("cuda", dtype, enabled, cache_enabled), with torch.cuda.amp.autocast's arguments."""

    def __init__(self, enabled=True, dtype=float16, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)  # warns without CUDA


class GradScaler(_amp.GradScaler):
    """gm.amp.GradScaler("cuda", ...), with torch.cuda.amp.GradScaler's arguments."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
