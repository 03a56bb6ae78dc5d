"""torch.cpu.amp's spelling (`with torch.cpu.amp.autocast():`): autocast for CPU ops, bfloat16 by default, and
the GradScaler of gpumemnet.amp on the CPU. PyTorch deprecates these names for torch.autocast("cpu", ...) and
torch.amp.GradScaler("cpu"); they stay quiet here rather than warn about that."""
from .. import amp as _amp
from .._core.dtype import bfloat16

__all__ = ["autocast", "GradScaler"]


class autocast(_amp.autocast):
    """gm.autocast("cpu", dtype, enabled, cache_enabled), with torch.cpu.amp.autocast's arguments."""

    def __init__(self, enabled=True, dtype=bfloat16, cache_enabled=True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """gm.amp.GradScaler("cpu", ...), with torch.cpu.amp.GradScaler's arguments."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
