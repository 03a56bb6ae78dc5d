"""gm.backends.cudnn: cuDNN's flags under PyTorch's names, so that training scripts' settings
(`cudnn.benchmark = True`, `cudnn.deterministic = True`) are accepted and read back.

What they change here: nothing yet. gpumemnet's CUDA convolutions use cuDNN and always choose the algorithm by
the memory it needs (csrc/ops_conv_workspace.c), which is the same on every run: `benchmark` (PyTorch's timed
search) and `deterministic` are recorded but do not change that choice; `enabled = False` does not switch to
other kernels; `allow_tf32` (True by default for convolutions, as in PyTorch) is recorded. is_available() and
version() report the cuDNN this build loaded (None / False without CUDA)."""
import contextlib

from .. import _C

__all__ = ["is_available", "version", "flags", "enabled", "benchmark", "deterministic", "allow_tf32",
           "benchmark_limit"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


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
    g = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    saved = {n: g[n] for n in names}
    g.update(enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit, deterministic=deterministic,
             allow_tf32=allow_tf32)
    try:
        yield
    finally:
        g.update(saved)
