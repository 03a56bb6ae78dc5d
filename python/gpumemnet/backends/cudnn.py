"""gm.backends.cudnn: cuDNN's flags under PyTorch's names, so that training scripts' settings
(`cudnn.benchmark = True`, `cudnn.deterministic = True`) are accepted and read back.

What they change here: `allow_tf32` (True by default, as in PyTorch) lets float32 convolutions use TF32 tensor
cores on Ampere and later: about three decimal digits of the inputs' precision for tensor-core speed (matmuls have
their own switch, gm.backends.cuda.matmul.allow_tf32, off by default as in PyTorch). gpumemnet's CUDA convolutions
use cuDNN and choose the algorithm by the memory it needs (csrc/ops_conv_workspace.c), which is the same on every
run: `benchmark` (PyTorch's timed search) and `deterministic` are recorded but do not change that choice;
`enabled = False` does not switch to other kernels. is_available() and version() report the cuDNN this build
loaded (None / False without CUDA)."""
import contextlib
import sys
import types

from .. import _C

__all__ = ["is_available", "version", "flags", "enabled", "benchmark", "deterministic", "allow_tf32",
           "benchmark_limit"]

enabled = True
benchmark = False
deterministic = False
benchmark_limit = 10


class _CudnnModule(types.ModuleType):
    """This module's class: `allow_tf32` is a property, so that `cudnn.allow_tf32 = False` reaches the C core as in
    PyTorch (a plain module attribute could not tell it)."""
    _allow_tf32 = [True]  # the C core's default too (csrc/cuda.c)

    @property
    def allow_tf32(self):
        return self._allow_tf32[0]

    @allow_tf32.setter
    def allow_tf32(self, value):
        value = bool(value)
        _C._set_cudnn_allow_tf32(value)
        self._allow_tf32[0] = value


sys.modules[__name__].__class__ = _CudnnModule


def version():
    """cuDNN's version as PyTorch gives it (9.19.0 -> 91900), or None when no cuDNN is loaded."""
    v = _C._build_info().get("cudnn")
    if not v:
        return None
    major, minor, patch = (int(x) for x in v.split(".")[:3])
    return major * 10000 + minor * 100 + patch


def is_available():
    """Whether this build loaded cuDNN (a CUDA build on a machine with the library)."""
    return version() is not None


def is_acceptable(tensor):
    """Whether cuDNN would take this tensor: a CUDA float tensor, with cuDNN loaded and enabled."""
    return bool(enabled and is_available() and getattr(tensor, "is_cuda", False) and
                tensor.dtype.is_floating_point)


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """Set the flags inside a `with` block and restore them after (PyTorch's torch.backends.cudnn.flags)."""
    mod = sys.modules[__name__]
    new = dict(enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit, deterministic=deterministic,
               allow_tf32=allow_tf32)
    saved = {n: getattr(mod, n) for n in new}
    for n, v in new.items():  # setattr, not globals(): allow_tf32 is a property that tells the C core
        setattr(mod, n, v)
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(mod, n, v)
