"""gm.backends.cpu: torch.backends.cpu's query of the CPU kernels' vector capability. torchvision's
transforms.v2 asks it to choose between resizing uint8 images natively (PyTorch's AVX2/AVX-512 uint8 kernels)
and through float32. gpumemnet has no uint8 interpolation kernels, so it answers "DEFAULT", which sends
torchvision down its float32 path: the values are torchvision's either way."""

__all__ = ["get_cpu_capability"]


def get_cpu_capability():
    return "DEFAULT"
