"""Running gpumemnet.distributed's worker scripts (tests/dist_workers/) under mpiexec, from the tests.

The workers import the gpumemnet the test imported (the installed one, the in-place build, the sanitizer's or the
emulator's), passed by PYTHONPATH. Without mpiexec or an MPI library the tests skip with the reason, except under
GPUMEMNET_REQUIRE_MPI=1 (CI sets it), where they fail: CI installs MPI and must not pass by skipping.

The launcher is $GPUMEMNET_MPIEXEC when set (e.g. Debian's Open MPI `mpiexec.openmpi`, with
GPUMEMNET_MPI_LIBRARY=libmpi.so.40 so that gpumemnet loads the library of that launcher), else the mpich wheel's
beside this Python, else the mpiexec on PATH. Open MPI's launcher refuses to run as root and to start more ranks
than cores without its flags: they are added when it is Open MPI's."""
import os
import shutil
import subprocess
import sys

import pytest

import gpumemnet as gm

GM_PATH = os.path.dirname(os.path.dirname(os.path.abspath(gm.__file__)))
WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_workers")


def missing(reason):
    """Skip, or fail where MPI is required (CI)."""
    if os.environ.get("GPUMEMNET_REQUIRE_MPI") == "1":
        pytest.fail(f"GPUMEMNET_REQUIRE_MPI=1 but {reason}")
    pytest.skip(reason)


def find_mpiexec():
    """The mpiexec of the MPI library gpumemnet loads: $GPUMEMNET_MPIEXEC, the wheel's beside this Python, else the
    one on PATH."""
    if os.environ.get("GPUMEMNET_MPIEXEC"):
        return shutil.which(os.environ["GPUMEMNET_MPIEXEC"])
    for d in dict.fromkeys((os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin"))):
        p = os.path.join(d, "mpiexec")
        if os.access(p, os.X_OK):
            return p
    return shutil.which("mpiexec")


def mpiexec_or_skip():
    if not gm.distributed.is_mpi_available():
        missing("no MPI library loads (pip install mpich)")
    exe = find_mpiexec()
    if not exe:
        missing("no mpiexec found (pip install mpich)")
    return exe


_launcher_flags = {}


def launcher_flags(exe):
    """The flags this launcher needs here: Open MPI's mpirun refuses root (CI's containers run as root) and more
    ranks than cores (-n 3 on 2 cores) unless told; MPICH's Hydra needs none."""
    if exe not in _launcher_flags:
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
            text = out.stdout + out.stderr
        except (OSError, subprocess.SubprocessError):
            text = ""
        flags = []
        if "Open MPI" in text or "OpenRTE" in text:
            flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
        _launcher_flags[exe] = flags
    return list(_launcher_flags[exe])


def env(**extra):
    e = dict(os.environ, PYTHONPATH=GM_PATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.update({k: str(v) for k, v in extra.items()})
    return e


def run(script, n, *args, timeout=180, extra_env=None, mpiexec_args=()):
    """mpiexec -n n python tests/dist_workers/<script> args...; the CompletedProcess (text output)."""
    exe = mpiexec_or_skip()
    cmd = [exe, *launcher_flags(exe), *mpiexec_args, "-n", str(n), sys.executable, os.path.join(WORKERS, script),
           *map(str, args)]
    try:
        return subprocess.run(cmd, env=env(**(extra_env or {})), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(f"{' '.join(cmd)} hung for {timeout} s\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")


def check_ok(proc, n, tag="OK"):
    """Every rank printed '<tag> rank r' and the launcher exited 0."""
    text = f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, text
    for r in range(n):
        assert f"{tag} rank {r}" in proc.stdout, text
