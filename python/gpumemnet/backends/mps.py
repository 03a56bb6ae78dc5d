"""gm.backends.mps: Apple's Metal backend, which gpumemnet does not have. Device-selection code asks it
(`elif torch.backends.mps.is_available(): device = torch.device("mps")`, PyTorch's own examples): here it
answers as PyTorch does on a machine without MPS."""

__all__ = ["is_available", "is_built", "is_macos_or_newer"]


def is_available():
    """False: gpumemnet has no MPS device."""
    return False


def is_built():
    """False: gpumemnet is never built with MPS."""
    return False


def is_macos_or_newer(major, minor):
    return False
