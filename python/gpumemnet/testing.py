"""gm.testing (layer 2): torch.testing's assert_close and make_tensor. Filled in by this stop's work."""
__all__ = []
