"""torch.distributed.tensor._utils (names only: gpumemnet has no DTensor)."""
from . import _WHY


def compute_local_shape_and_global_offset(*args, **kwargs):
    raise NotImplementedError(f"compute_local_shape_and_global_offset: {_WHY}")
