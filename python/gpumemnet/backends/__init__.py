"""gm.backends (layer 2, a library): switches of the compute libraries underneath, under PyTorch's names.

    gm.backends.cuda.matmul.allow_tf32 = True   # let cuBLAS use TF32 tensor cores for float32 matmul

allow_tf32 is False by default (as in PyTorch since 1.12): float32 products then round like the CPU's, to
float32 accuracy. True trades about three decimal digits of the inputs' precision for tensor-core speed on
Ampere and later. It applies to every CUDA device and to contexts created later; float16, bfloat16 and float64
products are not affected, and neither is the CPU.

gm.backends.cudnn (a module, so that `import torch.backends.cudnn as cudnn` works under the alias) holds cuDNN's
flags under PyTorch's names.
"""
from .. import _C
from . import cudnn  # noqa: F401

__all__ = ["cuda", "cudnn"]


class _CudaMatmul:
    """gm.backends.cuda.matmul: cuBLAS settings for matrix products."""
    __slots__ = ()
    _allow_tf32 = [False]  # class-level: one switch for the process

    @property
    def allow_tf32(self):
        return self._allow_tf32[0]

    @allow_tf32.setter
    def allow_tf32(self, value):
        if not isinstance(value, bool):
            raise TypeError(f"allow_tf32 must be a bool, got {type(value).__name__}")
        setter = getattr(_C, "_set_allow_tf32", None)
        if setter is not None:  # absent only in builds that predate the CUDA runtime; nothing to tell then
            setter(value)
        self._allow_tf32[0] = value

    def __repr__(self):
        return f"gm.backends.cuda.matmul(allow_tf32={self.allow_tf32})"


class _CudaBackend:
    """gm.backends.cuda: settings of the CUDA libraries (cuBLAS for now)."""
    __slots__ = ()
    matmul = _CudaMatmul()

    def __repr__(self):
        return f"gm.backends.cuda(matmul={self.matmul!r})"


cuda = _CudaBackend()
