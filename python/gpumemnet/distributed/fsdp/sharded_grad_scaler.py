"""torch.distributed.fsdp.sharded_grad_scaler: FSDP's GradScaler."""
from ...amp.grad_scaler import GradScaler

__all__ = ["ShardedGradScaler"]


class ShardedGradScaler(GradScaler):
    """amp.GradScaler taking FSDP's process_group argument. gpumemnet keeps whole parameters on every rank and
    DistributedDataParallel all-reduces the gradients before the scaler reads them, so every rank finds the same
    infs and the scaler needs no communication of its own."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, backoff_factor=0.5, growth_factor=2.0,
                 growth_interval=2000, enabled=True, process_group=None):
        super().__init__(device, init_scale, growth_factor, backoff_factor, growth_interval, enabled)
        self.process_group = process_group
