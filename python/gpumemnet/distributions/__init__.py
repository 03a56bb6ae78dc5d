"""gm.distributions (layer 2): torch.distributions' probability distributions. Filled in by this stop's work."""
__all__ = []
