"""`python -m gpumemnet` (the package's face, top layer): what was built and what this machine offers (versions,
BLAS kernels, devices, threads). Paste its output into bug reports.

`python -m gpumemnet run [--report] [--cap SIZE] [--estimate-only] script.py [args...]`: runs a script written
for PyTorch with `import torch` resolving to gpumemnet (gpumemnet/dropin.py); before each model's first training
step's backward, prints the predicted peak of its training steps (gpumemnet/memory/first_step.py)."""
import argparse
import os
import platform
import runpy
import sys
import traceback

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


def _mpi_line():
    """The MPI library gpumemnet.distributed would load (loading it starts nothing), or how to get one."""
    from .distributed import _mpi
    try:
        path, abi, version = _mpi.load()
    except RuntimeError:
        return "none found (gpumemnet.distributed needs one: pip install mpich)"
    first = " ".join(version.splitlines()[0].split()) if version else "?"
    return f"{first} ({abi}), {path}"


def run(argv):
    """`run`: the script runs as `python script.py args...` would run it, with torch resolving to gpumemnet."""
    parser = argparse.ArgumentParser(
        prog="python -m gpumemnet run",
        description="Run a PyTorch script on gpumemnet: `import torch` resolves to gpumemnet.")
    parser.add_argument("--report", action="store_true",
                        help="at the end, list the PyTorch names the script looked up that gpumemnet lacks")
    parser.add_argument("--cap", metavar="SIZE",
                        help="run as on a card of this size (6GiB, 512MiB, 8GB): the limit of the script's device "
                             "(each CUDA device, or the CPU when there is none) and the capacity the estimates "
                             "compare with")
    parser.add_argument("--estimate-only", action="store_true",
                        help="stop the script after the first model's step-1 estimate, without training")
    parser.add_argument("--no-estimate", action="store_true",
                        help="do not estimate each model's training steps")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    opts = parser.parse_args(argv)
    if opts.estimate_only and opts.no_estimate:
        parser.error("--estimate-only and --no-estimate ask for opposite things; give one")

    from . import dropin  # the top layer: only the `run` command needs it
    from .memory import first_step, set_limit
    cap = None
    if opts.cap is not None:
        try:
            cap = first_step.parse_bytes(opts.cap)
        except ValueError as e:
            parser.error(f"--cap: {e}")
        # The card rehearsed stands for the device the script trains on: its GPUs, or the CPU without one.
        for dev in [f"cuda:{i}" for i in range(cuda.device_count())] or ["cpu"]:
            set_limit(dev, cap)
    if not opts.no_estimate:
        first_step.watch(cap=cap, estimate_only=opts.estimate_only)
        dropin.set_attribute_hook(first_step.wrap_torch_attribute)
    dropin.as_torch()
    sys.argv = [opts.script] + opts.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(opts.script)))  # as `python script.py` does
    try:
        runpy.run_path(os.path.abspath(opts.script), run_name="__main__")  # __file__ absolute, as python gives
        if opts.estimate_only:
            print("gpumemnet run: the script ended without reaching a training step (no backward() from a "
                  "model's output): nothing to estimate", file=sys.stderr)
    except first_step.EstimateOnly as e:
        sys.exit(e.code)
    except SystemExit:
        raise
    except BaseException as e:  # shown as `python script.py` shows it: from the script's frame on
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != opts.script:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb or e.__traceback__)
        sys.exit(1)
    finally:
        first_step.unwatch()
        dropin.set_attribute_hook(None)
        if opts.report:
            names = dropin.missing_names()
            print(f"gpumemnet run: {len(names)} PyTorch name(s) looked up that gpumemnet does not have yet"
                  + (":" if names else ""), file=sys.stderr)
            for name in names:
                print(f"  {name}", file=sys.stderr)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "run":
        return run(argv[1:])
    if argv:
        sys.exit(f"python -m gpumemnet: unknown command {argv[0]!r}; the commands are: (none) for build and "
                 "machine information, `run script.py [args...]` for a PyTorch script")
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
    lines.append(f"MPI      {_mpi_line()}")
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
