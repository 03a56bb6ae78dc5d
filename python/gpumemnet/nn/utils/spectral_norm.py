"""torch.nn.utils.spectral_norm as a module: repositories import its hook class to find or remove the hooks
(`from torch.nn.utils.spectral_norm import SpectralNorm`); the package's `spectral_norm` stays the function, as in
PyTorch. The implementation is weight_norms.py's."""
from .weight_norms import _SpectralNorm as SpectralNorm, remove_spectral_norm, spectral_norm  # noqa: F401

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]
