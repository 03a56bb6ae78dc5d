"""torch.distributed.device_mesh (names only: gpumemnet has no device meshes; its parallelism is data-parallel)."""
from .tensor import DeviceMesh, init_device_mesh  # noqa: F401

__all__ = ["DeviceMesh", "init_device_mesh"]
