"""gm.profiler (layer 3): torch.profiler. Filled in by this stop's work."""
__all__ = []
