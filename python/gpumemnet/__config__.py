"""torch.__config__: how the library was built, as text (PyTorch Geometric reads `'USE_MKL' in
torch.__config__.show()` at import). gpumemnet's build: its own C kernels with OpenMP, OpenBLAS for the matrix
products, CUDA where it was built with it; no MKL, no oneDNN."""
import os

from . import _C
from . import cuda as _cuda

__all__ = ["show", "parallel_info"]


def show():
    """The build's configuration, as text (PyTorch's layout: 'PyTorch built with:' and a line per component)."""
    lines = ["gpumemnet built with:", "  - C kernels (gpumemnet's own), OpenMP", "  - OpenBLAS (matrix products)",
             f"  - CUDA: {'yes' if _cuda.is_built() else 'no'}",
             f"  - Build settings: USE_CUDA={'ON' if _cuda.is_built() else 'OFF'}, USE_OPENMP=ON"]
    return "\n".join(lines) + "\n"


def parallel_info():
    """The CPU threading settings, as text (PyTorch's layout)."""
    env = "".join(f"\t{v} : {os.environ.get(v, '[not set]')}\n" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"))
    return (f"ATen/Parallel:\n\tat::get_num_threads() : {_C.get_num_threads()}\n"
            f"OpenMP\n\tomp_get_max_threads() : {_C.get_num_threads()}\n"
            f"std::thread::hardware_concurrency() : {os.cpu_count()}\nEnvironment variables:\n{env}"
            f"ATen parallel backend: OpenMP\n")


def _cxx_flags():
    return ""
