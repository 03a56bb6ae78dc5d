"""GradBucket: what DistributedDataParallel hands a communication hook (PyTorch's dist.GradBucket) (layer 2)."""

__all__ = ["GradBucket"]


class GradBucket:
    """One bucket of gradients: buffer() is the flat tensor holding them (not divided by the world size), which a
    hook reduces and returns through a Future; gradients() are the parameters' views into it."""

    def __init__(self, index, buffer, parameters, gradients, is_last):
        self._index, self._buffer, self._params, self._grads, self._last = index, buffer, parameters, gradients, is_last

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer):
        """Replace the flat tensor (fp16_compress_wrapper does, with a compressed copy)."""
        self._buffer = buffer

    def gradients(self):
        return list(self._grads)

    def parameters(self):
        return list(self._params)

    def is_last(self):
        return self._last

    def __repr__(self):
        return f"GradBucket(index={self._index}, numel={self._buffer.numel()}, parameters={len(self._params)})"
