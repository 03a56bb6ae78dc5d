"""torch.distributed._composable.fsdp: FSDP2's fully_shard (names only; distributed/fsdp says what gpumemnet does
instead)."""
from ...fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, fully_shard  # noqa: F401

__all__ = ["fully_shard", "FSDPModule", "MixedPrecisionPolicy", "CPUOffloadPolicy"]
