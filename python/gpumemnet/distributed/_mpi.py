"""Finding and loading the MPI library (layer 2, distributed).

gpumemnet is never linked against MPI: the library is dlopen'ed when init_process_group asks for it
(csrc/dist_mpi_lib.c), so that `import gpumemnet` works on a machine without MPI. Search order:
  1. $GPUMEMNET_MPI_LIBRARY (a path to libmpi.so...);
  2. the `mpich` PyPI wheel in this environment (sys.prefix/lib/libmpi.so.12; its bin/ has the matching mpiexec);
  3. the system's: the loader's search path (ld.so.conf, LD_LIBRARY_PATH) for the MPICH ABI's libmpi.so.12 and
     libmpich.so.12 (Debian's libmpich-dev), Open MPI's libmpi.so.40, the MPI 5 ABI's libmpi_abi.so.1.
The ABIs each is read with, and what is not supported, are in csrc/dist_mpi.h."""
import ctypes.util
import os
import sys

from .. import _C

ENV = "GPUMEMNET_MPI_LIBRARY"
# The system's, in order: MPICH ABI first (the same ABI as the wheel, the one tested most here), then Open MPI,
# then a library with only the MPI 5 standard ABI.
SYSTEM_NAMES = ("libmpi.so.12", "libmpich.so.12", "libmpi.so.40", "libmpi_abi.so.1", "libmpi.so")

INSTALL_HINT = ("Install an MPI: `pip install mpich` (a wheel with the library and mpiexec, found in this "
                "environment), or the system's (Debian/Ubuntu: `apt-get install libmpich-dev mpich` or "
                "`libopenmpi-dev openmpi-bin`); or point $GPUMEMNET_MPI_LIBRARY at a libmpi.so. Then launch with "
                "`mpiexec -n N python train.py`.")

_loaded = None  # (path, abi, version text) once a library is loaded: one per process


def candidates():
    """[(path, where it came from)] in search order; paths that do not exist are left out (except the env's)."""
    out = []
    env = os.environ.get(ENV)
    if env:
        out.append((env, f"${ENV}"))
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        p = os.path.join(prefix, "lib", "libmpi.so.12")
        if os.path.exists(p):
            out.append((p, "the mpich wheel in " + prefix))
    for name in SYSTEM_NAMES:
        out.append((name, "the system's"))  # dlopen searches the loader's path
    if ctypes.util.find_library("mpi"):
        out.append((ctypes.util.find_library("mpi"), "the system's"))
    return out


def load():
    """Load the first MPI library that dlopen accepts: (path, ABI name, version text). Raises RuntimeError saying
    what was tried and how to install one."""
    global _loaded
    if _loaded:
        return _loaded
    tried = []
    for path, where in candidates():
        try:
            abi, version = _C.dist_mpi_load(path)
        except RuntimeError as e:
            if where.startswith("$"):  # the user's own choice: say why it failed, do not silently pass it by
                raise RuntimeError(f"{ENV}={path}: {e}") from None
            tried.append(f"{path} ({where}): {e}" if os.path.isabs(path) else path)
            continue
        _loaded = (path, abi, version)
        return _loaded
    raise RuntimeError("gpumemnet.distributed: no MPI library found (tried " + "; ".join(tried) + "). "
                       + INSTALL_HINT)


def is_available():
    """Whether an MPI library loads (loading it starts nothing: MPI_Init waits for init_process_group)."""
    try:
        load()
        return True
    except RuntimeError:
        return False


# Environment variables by which launchers announce how many ranks they started: a library that disagrees was
# not started by this launcher (Open MPI's library under MPICH's mpiexec starts every rank as a world of 1).
LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE")


def launcher_world_size():
    for var in LAUNCHER_SIZE_VARS:
        v = os.environ.get(var)
        if v and v.isdigit():
            return int(v), var
    return None, None
