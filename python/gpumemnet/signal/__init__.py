"""torch.signal: window functions (torch.signal.windows), SciPy's forms, which audio code builds filters and
spectrogram windows with."""
from . import windows  # noqa: F401

__all__ = ["windows"]
