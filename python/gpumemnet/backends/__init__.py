"""gm.backends (layer 2, a library): switches of the compute libraries underneath, under PyTorch's names.

    gm.backends.cuda.matmul.allow_tf32 = True   # let cuBLAS use TF32 tensor cores for float32 matmul

allow_tf32 is False by default (as in PyTorch since 1.12): float32 products then round like the CPU's, to
float32 accuracy. True trades about three decimal digits of the inputs' precision for tensor-core speed on
Ampere and later. It applies to every CUDA device and to contexts created later; float16, bfloat16 and float64
products are not affected, and neither is the CPU.

gm.backends.cudnn (a module, so that `import torch.backends.cudnn as cudnn` works under the alias) holds cuDNN's
flags under PyTorch's names; gm.backends.mps answers that there is no MPS device.
"""
import contextlib
import warnings

from .. import _C
from . import cpu, cudnn, mkldnn, mps  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps", "set_float32_matmul_precision", "get_float32_matmul_precision",
           "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled"]


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

    # PyTorch's switches for cuBLAS's reduced-precision sums in half-precision products, which LLM training scripts
    # set at their top: kept and read back; gpumemnet's half-precision products sum in float32 whatever they say
    _reduced = {"allow_bf16_reduced_precision_reduction": True, "allow_fp16_reduced_precision_reduction": True,
                "allow_fp16_accumulation": False}

    def __getattr__(self, name):
        if name in _CudaMatmul._reduced:
            return _CudaMatmul._reduced[name]
        raise AttributeError(f"'torch.backends.cuda.matmul' has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name not in _CudaMatmul._reduced:
            return object.__setattr__(self, name, value)
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
        _CudaMatmul._reduced[name] = value

    def __repr__(self):
        return f"gm.backends.cuda.matmul(allow_tf32={self.allow_tf32})"


class _CudaBackend:
    """gm.backends.cuda: settings of the CUDA libraries (cuBLAS for now). The attention kernel switches are
    PyTorch's names for one implementation here (nn/attention.py): enabling or disabling one changes nothing."""
    __slots__ = ()
    matmul = _CudaMatmul()

    @staticmethod
    def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
        return contextlib.nullcontext()

    @staticmethod
    def math_sdp_enabled():
        return True

    @staticmethod
    def flash_sdp_enabled():
        return False

    mem_efficient_sdp_enabled = cudnn_sdp_enabled = flash_sdp_enabled
    enable_flash_sdp = enable_math_sdp = enable_mem_efficient_sdp = enable_cudnn_sdp = staticmethod(
        lambda enabled: None)

    @staticmethod
    def is_built():
        """Whether gpumemnet was built with CUDA (a device need not be present)."""
        return _C._build_info()["cuda"] is not None

    def __repr__(self):
        return f"gm.backends.cuda(matmul={self.matmul!r})"


cuda = _CudaBackend()


# ---- torch.set_float32_matmul_precision and torch.use_deterministic_algorithms (gm re-exports them) ----
_PRECISIONS = ("highest", "high", "medium")
_precision = ["highest"]


def set_float32_matmul_precision(precision):
    """PyTorch's switch for float32 matrix products: "highest" keeps them float32; "high" and "medium" let cuBLAS
    use TF32 tensor cores (gm.backends.cuda.matmul.allow_tf32 = True). The CPU's products are always float32. Any
    other value has no effect but a warning, as in PyTorch."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the "
                      f"set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    cuda.matmul.allow_tf32 = precision != "highest"
    _precision[0] = precision


def get_float32_matmul_precision():
    """The last precision set, or what gm.backends.cuda.matmul.allow_tf32 set since ("high" / "highest")."""
    if (_precision[0] != "highest") != cuda.matmul.allow_tf32:
        return "high" if cuda.matmul.allow_tf32 else "highest"
    return _precision[0]


_deterministic = {"mode": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Recorded, and read back by are_deterministic_algorithms_enabled(). gpumemnet's CPU kernels give the same
    result run to run whatever the flag, and its CUDA convolutions take cuDNN's deterministic engines first
    whatever the flag (kernels/cuda/conv_plan.cu). As in PyTorch, cudnn.deterministic is a separate flag."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms: mode must be a bool, got {type(mode).__name__}")
    _deterministic.update(mode=mode, warn_only=bool(warn_only))


def are_deterministic_algorithms_enabled():
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


@contextlib.contextmanager
def __allow_nonbracketed_mutation():
    """PyTorch's permission to set the backend flags by plain assignment (MONAI's set_determinism enters it).
    gpumemnet never forbids that (PyTorch does only inside its own test suite), so there is nothing to lift."""
    yield
