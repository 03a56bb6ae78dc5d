"""`python -m gpumemnet` (the package's face, top layer): what was built and what this machine offers (versions,
BLAS kernels, devices, threads).

Paste its output into bug reports."""
import os
import platform
import sys

import numpy

from . import _C, cuda


def _gib(nbytes):
    return f"{nbytes / 2**30:.2f} GiB"


def _cpu_memory():
    capacity = getattr(_C, "memory_capacity", None)
    if capacity is not None:
        return _gib(capacity("cpu"))
    try:  # before the allocator reports it: the machine's physical memory
        return _gib(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) + " physical"
    except (ValueError, OSError, AttributeError):
        return "unknown"


def main():
    info = _C._build_info()
    version = getattr(sys.modules.get(__package__), "__version__", None) or info["version"]
    lines = [f"gpumemnet {version} (Python {platform.python_version()}, NumPy {numpy.__version__}, "
             f"{platform.machine()})"]

    blas = info["blas"] or "unknown"
    lines.append(f"BLAS     {blas}")
    lines.append(f"         core {info['blas_core']}, {info['blas_threads']} threads, from {info['blas_package']}")
    if info["cuda"] is None:
        lines += ["CUDA     not built", "cuDNN    not built", "cuBLAS   not built"]
    else:
        driver = info["cuda_driver"] or "none (no NVIDIA driver found)"
        lines.append(f"CUDA     {info['cuda']} (runtime {info['cuda_runtime']}, static), targets {info['cuda_archs']}, "
                     f"driver {driver}")
        cudnn = info["cudnn"]
        if info["cudnn_compiled"] and info["cudnn_compiled"] != cudnn:
            cudnn += f" (compiled against {info['cudnn_compiled']})"
        lines.append(f"cuDNN    {cudnn}")
        lines.append(f"cuBLAS   {info['cublas']}")
    lines.append(f"threads  OpenMP {info['openmp_threads']} (OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}), "
                 f"BLAS {info['blas_threads']}")

    lines.append("devices")
    lines.append(f"  cpu     {_cpu_memory()}, {os.cpu_count()} logical CPUs")
    n = cuda.device_count()
    for i in range(n):
        p = cuda.get_device_properties(i)
        lines.append(f"  cuda:{i}  {p.name}, {_gib(p.total_memory)}, compute capability {p.major}.{p.minor}, "
                     f"{p.multi_processor_count} SMs")
    if n == 0 and info["cuda"] is not None:
        reason = _C._cuda_last_error()
        lines.append("  cuda    none" + (f": {reason}" if reason else ""))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
