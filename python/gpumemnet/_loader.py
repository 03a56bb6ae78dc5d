"""Load the OpenBLAS shared library from the scipy-openblas32 wheel before the extension needs it (layer 0,
beside _C: it imports nothing of gpumemnet).

_C links against libscipy_openblas.so with an rpath to the wheel's folder beside ours in site-packages; when
the two are installed in different places (a user site, a build folder) the rpath misses, so we load the
library by absolute path first and the dynamic linker reuses it for _C."""
import ctypes
import os
import sys
import warnings


def preload_openblas():
    brief_openblas_spins()
    try:
        import scipy_openblas32
    except ImportError:  # the rpath may still find it
        return
    path = os.path.join(scipy_openblas32.get_lib_dir(), "lib" + scipy_openblas32.get_library() + ".so")
    if os.path.exists(path):
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def brief_openblas_spins():
    """OPENBLAS_THREAD_TIMEOUT=20 unless the user set it: OpenBLAS's idle worker threads then busy-wait 2^20 cycles
    (0.4 ms at 2.6 GHz) after a threaded gemm before they sleep, instead of the default 2^28 (0.1 s). The spin is
    a plain loop (no sched_yield): after one threaded sgemm the process burnt 98.9 ms of CPU during a 200 ms
    sleep (0.1 ms with the timeout set), and every OpenMP region started within that 0.1 s shared a core with
    it: a 3x3 256->256 14x14 direct conv forward (2 threads) right after an sgemm cost the process 7.9 ms of CPU,
    alone 3.1 ms (4.2 against 3.8 with the timeout). The conv benchmark times its sgemm ceiling right before each
    pass, which explains the direct kernel's 170-190 GFLOP/s there against ~300 in a plain loop (figures of an
    earlier session; not re-measured on an idle machine). In a training step it follows any threaded gemm (a
    Linear layer, a conv below the OpenMP grain whose gemm OpenBLAS threads). Back-to-back gemm
    calls, microseconds apart, still find the workers awake. OpenBLAS reads the variable when it loads: call this
    before loading it (preload_openblas does). tests/test_openblas_spin.py."""
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")


def passive_openmp_waits():
    """OMP_WAIT_POLICY=PASSIVE unless the user chose a policy: idle OpenMP threads then sleep at once instead of
    spinning. With spinning (libgomp's default spins a while first) on a machine that has other work to run (a
    notebook next to a data loader, CI, a shared server), descheduled threads make every parallel region wait
    for a time slice: benchmarks/omp_wait_policy.py, a small UNet step on 2 cores beside 6 busy processes,
    measured 252 ms passive, 465 ms with libgomp's default and 2324 ms always spinning; idle, 29.8 / 34.8 /
    34.7 ms (the same within this machine's noise). libgomp reads the variable when it is loaded, i.e. with _C:
    call this before importing _C.

    When another library already loaded libgomp in this process (torch imported first: its libgomp.so.1 is the
    one _C then uses), libgomp's setting stays, and with its default our idle OpenMP workers spin beside
    OpenBLAS's threads: on 2 cores a Linear layer (1600 x 128 -> 384) took 2.04 ms forward against 0.68, a
    2-layer Transformer encoder step 58.6 against 46.1 ms. Nothing can change the policy of a loaded libgomp, so
    this warns once, with the two ways out."""
    chosen = "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    loaded = None if chosen else loaded_libgomp()
    if loaded:
        by = " (by torch, imported first)" if "torch" in sys.modules else ""
        warnings.warn(f"gpumemnet: OpenMP's library was loaded before gpumemnet{by}, from {loaded}, without "
                      f"OMP_WAIT_POLICY, so its idle threads spin and compete with the matrix products' threads "
                      f"(a Linear layer measured 3x slower on 2 cores). Import gpumemnet before torch, or set "
                      f"OMP_WAIT_POLICY=PASSIVE in the environment before Python starts.", RuntimeWarning,
                      stacklevel=3)


def loaded_libgomp():
    """The path of a libgomp.so.1 already mapped into this process (the soname _C links), or None; None too where
    /proc/self/maps cannot be read (not Linux). A vendored copy under another soname (scikit-learn's
    libgomp-<hash>.so) is a runtime of its own and does not count."""
    try:
        with open("/proc/self/maps", encoding="utf8", errors="replace") as f:
            for line in f:
                fields = line.split(None, 5)  # address, perms, offset, device, inode, path (absent if anonymous)
                if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith("libgomp.so"):
                    return fields[5].strip()
    except OSError:
        pass
    return None
