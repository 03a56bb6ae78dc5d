"""gpumemnet.utils.model_zoo: PyTorch's old name for torch.hub.load_state_dict_from_url. gpumemnet downloads
nothing, so load_url raises the same NotImplementedError as gm's hub (python/gpumemnet/compat/hub.py)."""
from ..compat.hub import load_state_dict_from_url as load_url  # noqa: F401
from ..compat.hub import tqdm  # noqa: F401 - torch.utils.model_zoo re-exports torch.hub's (torchvision imports it)

__all__ = ["load_url", "tqdm"]
