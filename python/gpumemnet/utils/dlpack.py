"""torch.utils.dlpack: DLPack exchange of CPU tensors (gpumemnet/_interop.py)."""
from .._interop import from_dlpack, to_dlpack  # noqa: F401
