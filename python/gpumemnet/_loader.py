"""Load the OpenBLAS shared library from the scipy-openblas32 wheel before the extension needs it.

_C links against libscipy_openblas.so with an rpath to the wheel's folder beside ours in site-packages; when
the two are installed in different places (a user site, a build folder) the rpath misses, so we load the
library by absolute path first and the dynamic linker reuses it for _C."""
import ctypes
import os


def preload_openblas():
    try:
        import scipy_openblas32
    except ImportError:  # the rpath may still find it
        return
    path = os.path.join(scipy_openblas32.get_lib_dir(), "lib" + scipy_openblas32.get_library() + ".so")
    if os.path.exists(path):
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
