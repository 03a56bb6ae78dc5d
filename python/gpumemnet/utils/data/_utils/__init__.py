"""torch.utils.data._utils: the package PyTorch keeps its loader's helpers in; libraries import
torch.utils.data._utils.collate (Opacus: default_collate), which is here."""
from . import collate

__all__ = ["collate"]
