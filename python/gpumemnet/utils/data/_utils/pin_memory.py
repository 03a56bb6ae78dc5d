"""torch.utils.data._utils.pin_memory: pin_memory(data) pins every tensor in a batch as the DataLoader's
pin_memory=True pins them (_collate._pin, through PyTorch's containers)."""
from .._collate import _pin

__all__ = ["pin_memory"]


def pin_memory(data, device=None):
    return _pin(data)
