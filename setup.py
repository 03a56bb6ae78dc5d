"""Build gpumemnet._C: always the CPU extension; the CUDA kernels too when nvcc is found (see README "Build").

CPU part: every csrc/*.c and kernels/cpu/*.c, OpenMP, OpenBLAS from the scipy-openblas32 wheel (so that
`pip install .` needs nothing installed by hand).

CUDA part, decided when build_ext runs (so that egg_info/sdist never need a toolkit):
  GPUMEMNET_CUDA=0     CPU only, whatever is installed.
  GPUMEMNET_CUDA=1     CUDA required: a missing nvcc, cuDNN or cuBLAS is an error.
  GPUMEMNET_CUDA=emu   the CUDA emulator (kernels/cuda/README.md): the same kernels/cuda/*.cu compiled by the C++
                       compiler against kernels/cuda/emu/include, running on the CPU as fibers, so that the CUDA
                       code paths and the CPU-vs-CUDA tests run on machines without a GPU. Files that call cuDNN
                       or cuBLAS are replaced by kernels/cuda/emu/*_emu.cpp. For testing, not for speed.
  unset                CUDA when nvcc is found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin) along with cuDNN and
                       cuBLAS; otherwise CPU only, and the reason is printed.
Every kernels/cuda/*.cu is compiled by nvcc into objects linked into the same gpumemnet._C. cudart is linked
statically (a CUDA build imports on a machine with no GPU and no driver: the driver is only dlopen'ed by cudart
at the first CUDA call); cuBLAS and cuDNN are shared libraries found in the toolkit, $CUDNN_HOME or the
nvidia-* Python wheels, and reached at run time through an rpath.
  GPUMEMNET_CUDA_ARCHS   targets, default "sm_90,compute_80": Hopper machine code (H100/H200) plus compute_80
                         PTX that the driver JIT-compiles on any other GPU from Ampere (A100) on, Blackwell
                         included. Two targets keep compile time short. "sm_80,sm_90,compute_90" style lists.
  GPUMEMNET_JOBS         parallel compile jobs (default: CPU count; `build_ext -j N` also works).
  GPUMEMNET_SANITIZE=1   AddressSanitizer + UndefinedBehaviorSanitizer over the C sources, with -fno-wrapv so that
                         signed overflow is reported instead of defined by CPython's own -fwrapv (tools/sanitize.sh
                         runs the tests on such a build). For testing, not for speed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from glob import glob

import numpy
import scipy_openblas32
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARCHS = "sm_90,compute_80"
# -fno-wrapv comes after CPython's -fwrapv and wins: UBSan then reports signed overflow in our size arithmetic.
# -O1 keeps the reports' stacks readable while the suite still runs in minutes.
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-wrapv", "-g", "-O1"]


def rel(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob(os.path.join(ROOT, pattern)))


def project_version():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf8") as f:
        m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
    return m.group(1) if m else "0.0.0"


def cstr(s):
    """A Python string as a C string-literal macro value (the compiler gets argv directly, no shell)."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---- finding CUDA, cuBLAS, cuDNN ---------------------------------------------------------------------------
class CudaNotFound(Exception):
    pass


def find_nvcc():
    """nvcc on PATH first (pip's isolated build keeps PATH), then $CUDA_HOME / $CUDA_PATH, then /usr/local/cuda."""
    found = shutil.which("nvcc")
    if found:
        return os.path.abspath(found)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            return os.path.join(home, "bin", "nvcc")
    return None


def cuda_home_for(nvcc):
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.path.isdir(os.path.join(home, "include")):
        return home
    # Not realpath: /usr/local/cuda/lib64 as rpath survives a toolkit update, /usr/local/cuda-13.0 does not.
    return os.path.dirname(os.path.dirname(nvcc))


def toolkit_lib_dir(home):
    for d in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
        if os.path.exists(os.path.join(home, d, "libcudart_static.a")):
            return os.path.join(home, d)
    raise CudaNotFound(f"libcudart_static.a not found under {home}/lib64 (needed to link cudart statically)")


def nvcc_version(nvcc):
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"release [\d.]+, V([\d.]+)", out) or re.search(r"release ([\d.]+)", out)
    if not m:
        raise CudaNotFound(f"could not read the CUDA version from `{nvcc} --version`")
    return m.group(1)


def wheel_dirs(sub):
    """nvidia/*/<sub> folders of the nvidia-* wheels (nvidia/cudnn/lib, nvidia/cublas/lib, nvidia/cu13/lib)."""
    dirs = []
    for entry in sys.path:
        if os.path.isdir(os.path.join(entry, "nvidia")):
            dirs += sorted(glob(os.path.join(entry, "nvidia", "*", sub)))
    return dirs


def find_library(name, header, candidates):
    """First (include_dir, library_file) among candidate (include, lib) dirs holding `header` and lib<name>.so*.

    The library is passed to the linker by path: the wheels ship only libcudnn.so.9 (no unversioned link), and
    the linker records the SONAME either way."""
    for inc, lib in candidates:
        if not (inc and lib and os.path.exists(os.path.join(inc, header))):
            continue
        files = [os.path.join(lib, f"lib{name}.so")] + sorted(glob(os.path.join(lib, f"lib{name}.so.*")))
        for f in files:
            if os.path.exists(f):
                return inc, f
    return None


def header_version(path, prefix):
    with open(path, encoding="utf8", errors="replace") as f:
        text = f.read()
    parts = []
    for key in ("MAJOR", "MINOR", "PATCHLEVEL" if prefix == "CUDNN" else "PATCH"):
        m = re.search(rf"#define\s+{prefix}_(?:VER_)?{key}\s+(\d+)", text)
        if not m:
            return "unknown"
        parts.append(m.group(1))
    return ".".join(parts)


def parse_archs(spec):
    gencode, names = [], []
    for item in re.split(r"[\s,;]+", spec.strip()):
        m = re.fullmatch(r"(sm|compute)_(\d+[a-z]?)", item)
        if not m:
            # A typo in an explicit setting is an error, not a reason to fall back to a CPU-only build.
            raise SystemExit(f"gpumemnet: GPUMEMNET_CUDA_ARCHS entry {item!r}: expected sm_NN (machine code) "
                             f"or compute_NN (PTX), e.g. 'sm_90,compute_80'")
        kind, num = m.groups()
        gencode += ["-gencode", f"arch=compute_{num},code={kind}_{num}"]
        names.append(item)
    return gencode, names


def rpath_for(libfile):
    """Absolute rpath, plus an $ORIGIN-relative one when the library sits in an nvidia-* wheel in site-packages
    (the same site-packages gpumemnet gets installed into, if the build environment is the target one)."""
    d = os.path.dirname(os.path.abspath(libfile))
    paths = [d]
    m = re.search(r"[/\\](nvidia[/\\].+)$", d)
    if m:
        paths.insert(0, "$ORIGIN/../" + m.group(1).replace("\\", "/"))
    return paths


def detect_cuda():
    """Returns a dict describing the CUDA build, or raises CudaNotFound with the reason."""
    nvcc = find_nvcc()
    if not nvcc:
        raise CudaNotFound("nvcc not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin")
    home = cuda_home_for(nvcc)
    libdir = toolkit_lib_dir(home)
    incdir = os.path.join(home, "include")
    version = nvcc_version(nvcc)

    cudnn_home = os.environ.get("CUDNN_HOME") or os.environ.get("CUDNN_PATH")
    cands = []
    if cudnn_home:
        if not os.path.exists(os.path.join(cudnn_home, "include", "cudnn.h")):
            raise SystemExit(f"gpumemnet: CUDNN_HOME={cudnn_home} has no include/cudnn.h")
        cands += [(os.path.join(cudnn_home, "include"), os.path.join(cudnn_home, d)) for d in ("lib64", "lib")]
    cands.append((incdir, libdir))
    cands += [(os.path.join(os.path.dirname(lib), "include"), lib) for lib in wheel_dirs("lib")]
    cudnn = find_library("cudnn", "cudnn.h", cands)
    if not cudnn:
        where = f"$CUDNN_HOME={cudnn_home}, " if cudnn_home else ""
        raise CudaNotFound(f"cuDNN not found ({where}{home}, nvidia-cudnn wheel); set CUDNN_HOME to its root")
    cublas = find_library("cublas", "cublas_v2.h", cands)
    if not cublas:
        raise CudaNotFound(f"cuBLAS not found in {home} or the nvidia-cublas wheel")

    archs = os.environ.get("GPUMEMNET_CUDA_ARCHS") or DEFAULT_ARCHS
    gencode, arch_names = parse_archs(archs)
    cudnn_ver_h = os.path.join(cudnn[0], "cudnn_version.h")
    cublas_api_h = os.path.join(cublas[0], "cublas_api.h")
    return {
        "nvcc": nvcc,
        "home": home,
        "libdir": libdir,
        "include_dirs": list(dict.fromkeys([incdir, cudnn[0], cublas[0]])),
        "version": version,
        "cudnn_lib": cudnn[1],
        "cudnn_version": header_version(cudnn_ver_h, "CUDNN") if os.path.exists(cudnn_ver_h) else "unknown",
        "cublas_lib": cublas[1],
        "cublas_version": header_version(cublas_api_h, "CUBLAS") if os.path.exists(cublas_api_h) else "unknown",
        "gencode": gencode,
        "archs": arch_names,
    }


def uses_vendor_library(src):
    """True for the .cu files that call cuDNN or cuBLAS (the emulator build replaces them)."""
    with open(os.path.join(ROOT, src), encoding="utf8") as f:
        return re.search(r"#\s*include\s*[<\"](cudnn\.h|cublas_v2\.h|cublasLt\.h)[>\"]", f.read()) is not None


# ---- the build command ---------------------------------------------------------------------------------------
def links_libmvec(compiler):
    """Whether the build's C compiler links glibc's vector math library (kernels/cpu/vec_math.h): glibc on x86-64 has
    it; elsewhere the float32 activations call the scalar libm functions."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return False
    cc = (getattr(compiler, "compiler_so", None) or [os.environ.get("CC", "cc")])[0]
    try:
        probe = subprocess.run([cc, "-x", "c", "-", "-o", os.devnull, "-lmvec"],
                               input=b"int main(void) { return 0; }", capture_output=True)
    except OSError:
        return False
    return probe.returncode == 0


class BuildExt(build_ext):
    """build_ext that decides CPU vs CPU+CUDA, compiles .c files in parallel and .cu files with nvcc."""

    def jobs(self):
        if isinstance(self.parallel, int) and not isinstance(self.parallel, bool) and self.parallel > 0:
            return self.parallel
        env = os.environ.get("GPUMEMNET_JOBS")
        return int(env) if env and env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)

    def build_extensions(self):
        # decided here, as CUDA is, so that egg_info and sdist run no compiler; before configure*, whose
        # configuration record (the macros) then notices a change
        if links_libmvec(self.compiler):
            for ext in self.extensions:
                ext.define_macros.append(("GM_HAVE_LIBMVEC", "1"))
                ext.libraries.append("mvec")
        if os.environ.get("GPUMEMNET_SANITIZE", "").strip() == "1":
            print("gpumemnet: building with AddressSanitizer + UndefinedBehaviorSanitizer (GPUMEMNET_SANITIZE=1)",
                  flush=True)
            for ext in self.extensions:
                ext.extra_compile_args += SANITIZE_FLAGS
                ext.extra_link_args += ["-fsanitize=address,undefined"]
        mode = os.environ.get("GPUMEMNET_CUDA", "").strip()
        if mode not in ("", "0", "1", "emu"):
            raise SystemExit(f"gpumemnet: GPUMEMNET_CUDA must be 0, 1, emu or unset, got {mode!r}")
        cuda = None
        if mode == "emu":
            print("gpumemnet: building CPU + the CUDA emulator (GPUMEMNET_CUDA=emu; kernels run on the CPU)",
                  flush=True)
            for ext in self.extensions:
                self.configure_emulator(ext)
            super().build_extensions()
            return
        if mode == "0":
            reason = "GPUMEMNET_CUDA=0"
        else:
            try:
                cuda = detect_cuda()
            except (CudaNotFound, OSError, subprocess.CalledProcessError) as e:
                if mode == "1":
                    raise SystemExit(f"gpumemnet: GPUMEMNET_CUDA=1 but CUDA cannot be built: {e}")
                reason = str(e)
        if cuda:
            print(f"gpumemnet: building CPU + CUDA (cuda {cuda['version']} at {cuda['home']}, "
                  f"cuDNN {cuda['cudnn_version']} at {os.path.dirname(cuda['cudnn_lib'])}, "
                  f"cuBLAS {cuda['cublas_version']}, targets {'+'.join(cuda['archs'])})", flush=True)
        else:
            print(f"gpumemnet: building CPU only: {reason}", flush=True)
        for ext in self.extensions:
            self.configure(ext, cuda)
        super().build_extensions()

    def configure(self, ext, cuda):
        ext.define_macros.append(("GM_BLAS_PACKAGE", cstr(f"scipy-openblas32 {scipy_openblas32.__version__}")))
        config = {"macros": ext.define_macros, "cuda": cuda, "flags": ext.extra_compile_args}
        if cuda:
            macros = [("GM_WITH_CUDA", "1"), ("GM_CUDA_VERSION", cstr(cuda["version"])),
                      ("GM_CUDNN_VERSION", cstr(cuda["cudnn_version"])),
                      ("GM_CUBLAS_VERSION", cstr(cuda["cublas_version"])),
                      ("GM_CUDA_ARCHS", cstr(",".join(cuda["archs"])))]
            ext.define_macros += macros
            ext.include_dirs += cuda["include_dirs"]
        # Before any compile: a configuration change forces every object (.c and .cu) to be rebuilt.
        self.invalidate_if_config_changed(config)
        if cuda:
            cu_sources = rel("kernels/cuda/*.cu")
            ext.depends += cu_sources + rel("kernels/cuda/*.cuh") + rel("kernels/cuda/*.h")
            ext.extra_objects += self.compile_cuda(cu_sources, ext, cuda)
            rpaths = list(dict.fromkeys(rpath_for(cuda["cudnn_lib"]) + rpath_for(cuda["cublas_lib"])))
            ext.extra_link_args += [
                os.path.join(cuda["libdir"], "libcudart_static.a"),
                # cudart's symbols stay inside _C: another extension with its own cudart cannot clash with ours.
                "-Wl,--exclude-libs,libcudart_static.a",
                cuda["cublas_lib"], cuda["cudnn_lib"],
                "-ldl", "-lrt", "-lpthread", "-lstdc++",
            ] + [f"-Wl,-rpath,{p}" for p in rpaths]

    def configure_emulator(self, ext):
        inc = os.path.join("kernels", "cuda", "emu", "include")
        macros = [("GM_WITH_CUDA", "1"), ("GM_CUDA_EMU", "1"), ("GM_CUDA_VERSION", cstr("emulator")),
                  ("GM_CUDA_ARCHS", cstr("emulator"))]
        ext.define_macros += macros
        ext.include_dirs.insert(0, inc)  # before anything that could hold a real cuda_runtime.h
        self.invalidate_if_config_changed({"macros": ext.define_macros, "cuda": "emu",
                                           "flags": ext.extra_compile_args})
        # The cuDNN / cuBLAS files are replaced by their stand-ins in emu/.
        cu = [s for s in rel("kernels/cuda/*.cu") if not uses_vendor_library(s)]
        sources = cu + rel("kernels/cuda/emu/*.cpp")
        ext.depends += sources + rel("kernels/cuda/*.cuh") + rel("kernels/cuda/*.h") + rel(inc + "/*.h")
        ext.extra_objects += self.compile_emulated(sources, ext, macros, inc)
        ext.extra_link_args += ["-lstdc++", "-lpthread"]

    def compile_emulated(self, sources, ext, macros, inc):
        cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
        if not cxx:
            raise SystemExit("gpumemnet: GPUMEMNET_CUDA=emu needs a C++17 compiler (g++), none found")
        flags = ["-std=c++17", "-O2", "-fPIC", "-Wall", "-Wno-unused-function", "-Wno-unknown-pragmas"]
        flags += [f"-D{k}={v}" for k, v in macros] + [f"-I{inc}", "-Ikernels"]
        # kernels/*.h (what both backends share) and kernels/cuda/: nothing under kernels/cuda includes kernels/cpu.
        headers = rel("kernels/*.h") + rel("kernels/cuda/*.cuh") + rel("kernels/cuda/*.h")
        headers += rel("kernels/cuda/emu/*.h") + rel(inc + "/*.h")
        return self.compile_parallel(sources, headers, lambda src, obj: [cxx] + (
            ["-x", "c++"] if src.endswith(".cu") else []) + ["-c", src, "-o", obj] + flags, "emu")

    def compile_parallel(self, sources, headers, command, tag):
        """Compile each source to build_temp/<tag>/<source>.o with command(src, obj), skipping up-to-date ones."""
        def one(src):
            obj = os.path.join(self.build_temp, tag, os.path.splitext(src)[0] + ".o")
            if not self.force and os.path.exists(obj) and all(
                    os.path.getmtime(obj) >= os.path.getmtime(p) for p in [src] + headers):
                return obj
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            cmd = command(src, obj)
            print(" ".join(cmd), flush=True)
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.stdout or r.stderr:
                print(r.stdout + r.stderr, end="", flush=True)
            if r.returncode:
                raise SystemExit(f"gpumemnet: compiling {src} failed (exit {r.returncode})")
            return obj

        with ThreadPoolExecutor(self.jobs()) as pool:
            return list(pool.map(one, sources))

    def invalidate_if_config_changed(self, config):
        """Switching CPU <-> CUDA (or toolkits) changes no source file; without this the old _C would be kept."""
        stamp = os.path.join(self.build_temp, "gpumemnet-config.json")
        text = json.dumps(config, sort_keys=True, default=str)
        old = open(stamp, encoding="utf8").read() if os.path.exists(stamp) else None
        if old != text:
            self.force = True
            os.makedirs(self.build_temp, exist_ok=True)
            with open(stamp, "w", encoding="utf8") as f:
                f.write(text)

    def compile_cuda(self, sources, ext, cuda):
        if not sources:
            return []
        # kernels/ only, not csrc/: a kernel never sees Python or the allocator (DESIGN.md).
        incs = [f"-I{d}" for d in ["kernels"] + cuda["include_dirs"]]
        flags = ["-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-DGM_WITH_CUDA=1"] + cuda["gencode"]
        # kernels/*.h, what both backends share (structs, Philox, pool windows, resize taps), and kernels/cuda/ itself:
        # nothing under kernels/cuda includes kernels/cpu (kernels/README.md).
        headers = rel("kernels/*.h") + rel("kernels/cuda/*.cuh") + rel("kernels/cuda/*.h")
        return self.compile_parallel(sources, headers, lambda src, obj: [cuda["nvcc"], "-c", src, "-o", obj] + flags
                                     + incs, "nvcc")

    def build_extension(self, ext):
        # distutils compiles one file after another; a ThreadPool over the per-object compile is the usual fix.
        compiler, jobs = self.compiler, self.jobs()
        serial_compile = compiler.compile

        def parallel_compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                             extra_preargs=None, extra_postargs=None, depends=None):
            macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
                output_dir, macros, include_dirs, sources, depends, extra_postargs)
            cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)
            headers = [d for d in depends or [] if d.endswith(".h")]

            def one(obj):
                src, src_ext = build[obj]
                # Recompile only what changed (or everything after a configuration change, see above).
                if not self.force and os.path.exists(obj) and all(
                        os.path.getmtime(obj) >= os.path.getmtime(p) for p in [src] + headers if os.path.exists(p)):
                    return
                compiler._compile(obj, src, src_ext, cc_args, extra_postargs, pp_opts)

            with ThreadPoolExecutor(jobs) as pool:
                list(pool.map(one, [o for o in objects if o in build]))
            return objects

        compiler.compile = parallel_compile
        try:
            super().build_extension(ext)
        finally:
            compiler.compile = serial_compile


ext = Extension(
    "gpumemnet._C",
    sources=rel("csrc/*.c") + rel("kernels/cpu/*.c"),
    include_dirs=[numpy.get_include(), scipy_openblas32.get_include_dir(), "csrc", "kernels"],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("GM_VERSION", cstr(project_version()))],
    # -fno-math-errno: sqrt never sets errno for us, and without the flag it blocks vectorising Adam (3.4x).
    extra_compile_args=["-O3", "-fno-math-errno", "-fopenmp", "-std=c11", "-Wall", "-Wno-unused-function"],
    extra_link_args=["-fopenmp"],
    library_dirs=[scipy_openblas32.get_lib_dir()],
    # dl: gpumemnet.distributed dlopens the MPI library at run time (csrc/dist_mpi.h); glibc >= 2.34 has it in libc.
    libraries=[scipy_openblas32.get_library(), "dl"],
    # The OpenBLAS wheel sits beside us in site-packages; gpumemnet/__init__.py also preloads it.
    runtime_library_dirs=["$ORIGIN/../scipy_openblas32/lib"],
    depends=rel("csrc/*.h") + rel("kernels/*.h") + rel("kernels/cpu/*.h"),
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})
