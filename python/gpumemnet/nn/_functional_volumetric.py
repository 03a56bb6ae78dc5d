"""3-D convolutions and pooling (conv3d, conv_transpose3d, max_pool3d, avg_pool3d, adaptive pools);
nn.functional imports __all__."""

__all__ = []
