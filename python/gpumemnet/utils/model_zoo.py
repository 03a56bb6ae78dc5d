"""gpumemnet.utils.model_zoo: PyTorch's old name for torch.hub.load_state_dict_from_url. gpumemnet downloads
nothing, so load_url raises the same NotImplementedError as gm's hub (python/gpumemnet/compat/hub.py)."""
from ..compat.hub import load_state_dict_from_url as load_url  # noqa: F401

__all__ = ["load_url"]
