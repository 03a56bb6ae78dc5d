"""The rules a compile error enforces (constructs the emulator forbids, headers clean as C11 and C++17), and that
the real kernels/cuda/*.cu files build against the emulator without clashing inline definitions and run (Philox
bit-identical to the CPU); the cost of a launch, printed. Needs only a C++17 compiler; no GPU, no gpumemnet
build."""
import glob
import os
import re
import shutil
import subprocess

import pytest

from emu_util import CC, CXX, DEFS, KERNELS, compile_cmd, requires_cxx, run

pytestmark = requires_cxx


# ---- what must not compile, what must -----------------------------------------------------------------------------
FORBIDDEN = {
    "warp shuffle": "__global__ void k(float *p) { p[0] = __shfl_down_sync(0xffffffffu, p[0], 1); }",
    "warp vote": "__global__ void k(int *p) { p[0] = __ballot_sync(0xffffffffu, p[0] > 0); }",
    "block vote": "__global__ void k(int *p) { p[0] = __syncthreads_count(p[0] > 0); }",
    "triple chevrons": "__global__ void k(int *p) { p[0] = 1; }\nvoid f(int *p) { k<<<1, 1>>>(p); }",
    "extern shared": "__global__ void k(float *p) { extern __shared__ float s[]; s[0] = p[0]; }",
    "bare min": "__global__ void k(int *p) { p[0] = min(p[0], p[1]); }",
    "half arithmetic": "#include <cuda_fp16.h>\n__global__ void k(__half *p) { p[0] = p[0] + p[1]; }",
    "cooperative groups": "#include <cooperative_groups.h>\n__global__ void k(int *p) { p[0] = 1; }",
}


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_forbidden_constructs_do_not_compile(tmp_path, what):
    src = tmp_path / "bad.cu"
    src.write_text("#include <cuda_runtime.h>\n" + FORBIDDEN[what] + "\n")
    r = subprocess.run(compile_cmd(str(src), str(tmp_path / "bad.o")), capture_output=True, text=True)
    assert r.returncode != 0, f"{what} compiled against the emulator; the rules (kernels/cuda/README.md) forbid it"


def test_headers_are_clean_c11_and_cxx17(tmp_path):
    """csrc's C files include the runtime headers; the kernels' C++ must not get warnings from them either."""
    src = tmp_path / "h.c"
    src.write_text(r"""
#include <cuda_runtime.h>
#include <cuda_runtime_api.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <driver_types.h>
int use(void) {
    struct cudaDeviceProp p;
    cudaStream_t s;
    void *q;
    int v;
    dim3 d = {1, 2, 3};
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaGetDeviceProperties(&p, 0);
    cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0);
    cudaMalloc(&q, 16);
    cudaMemcpyAsync(q, q, 0, cudaMemcpyDefault, s);
    return (int)d.z + (int)__half2float(__float2half_rn(1.0f)) + (int)__bfloat162float(__float2bfloat16_rn(2.0f));
}
""")
    if CC:
        r = subprocess.run([CC, "-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-c", str(src), "-o",
                            str(tmp_path / "h.o")] + DEFS, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    cu = tmp_path / "h.cu"
    cu.write_text(r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__device__ __forceinline__ float twice(float x) { return __fmul_rn(x, 2.0f); }
__global__ void __launch_bounds__(256) k(float *__restrict__ p, const float *q, int n, unsigned *bits) {
    __shared__ float s[256];
    s[threadIdx.x] = __ldg(q + threadIdx.x) + rsqrtf(4.0f) + __expf(0.0f) + __logf(1.0f) + __powf(2.0f, 1.0f);
    __syncthreads();
    __threadfence();
    p[threadIdx.x] = twice(s[(threadIdx.x + 1) % blockDim.x]) + __fdividef(1.0f, 2.0f) + (float)rsqrt(4.0);
    bits[threadIdx.x] = __float_as_uint(__uint_as_float(7u)) + (unsigned)__float_as_int(__int_as_float(1)) +
                        (unsigned)__double_as_longlong(__longlong_as_double(2)) + __popc(7u) + __clz(1) +
                        (unsigned)__double2float_rn(1.0) + __half_as_ushort(__float2half_rn(0.0f)) +
                        __bfloat16_as_ushort(__float2bfloat16_rn(0.0f)) + (unsigned)__float2int_rn(2.5f);
    (void)n;
}
void launch(float *p, const float *q, unsigned *b) { gm_emu_launch(k, dim3(1), dim3(256), p, q, 256, b); }
struct table { int n; float v[4]; };
__global__ void no_pointers(table t, double d) { (void)t; (void)d; }
__global__ void no_arguments() {}
void launch2() {
    gm_emu_launch(no_pointers, dim3(1), dim3(32), table{}, 1.0);
    gm_emu_launch(no_arguments, dim3(1), dim3(32));
}
""")
    r = subprocess.run([CXX, "-x", "c++", "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-c", str(cu), "-o",
                        str(tmp_path / "h.o")] + DEFS, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def emulated_sources():
    """kernels/cuda/*.cu that the emulator build compiles (those calling cuDNN/cuBLAS are replaced)."""
    out = []
    for s in sorted(glob.glob(os.path.join(KERNELS, "cuda", "*.cu"))):
        with open(s, encoding="utf8") as f:
            if not re.search(r"#\s*include\s*[<\"](cudnn\.h|cublas_v2\.h|cublasLt\.h)[>\"]", f.read()):
                out.append(os.path.basename(s))
    return out


@pytest.fixture(scope="session")
def kernel_object(tmp_path_factory):
    """kernel_object(name) -> (object path or None, compiler output), compiled once per session."""
    d = tmp_path_factory.mktemp("kernels")
    done = {}

    def _compile(name):
        if name not in done:
            obj = str(d / (name + ".o"))
            r = subprocess.run(compile_cmd(os.path.join(KERNELS, "cuda", name), obj), capture_output=True, text=True)
            done[name] = (obj if r.returncode == 0 else None, r.stderr)
        return done[name]
    return _compile


@pytest.mark.parametrize("name", emulated_sources())
def test_kernel_file_builds_against_the_emulator(kernel_object, name):
    obj, out = kernel_object(name)
    assert obj, f"{name} does not compile against the emulator:\n{out}"


def test_no_conflicting_inline_definitions_across_kernel_files(kernel_object):
    """nvcc compiles each .cu's device code on its own, so two files may both define, say, an `inline __device__
    float load(...)` with different bodies. Linked together as C++ for the emulator, that is an ODR violation: the
    linker keeps one of the two and one file silently runs the other's code. Flag same-name inline (weak)
    definitions of different sizes; the fix is `static` (or an anonymous namespace) for file-local helpers."""
    nm = shutil.which("nm")
    if not nm:
        pytest.skip("nm (binutils) not found")
    sizes = {}
    for name in emulated_sources():
        obj, _ = kernel_object(name)
        if not obj:
            continue  # test_kernel_file_builds_against_the_emulator reports it
        out = subprocess.run([nm, "-S", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) == 4 and f[2] in ("W", "V", "u"):
                sizes.setdefault(f[3], {})[name] = f[1]
    clashes = {sym: by_file for sym, by_file in sizes.items() if len(set(by_file.values())) > 1}
    assert not clashes, f"inline definitions that differ between kernel files (make them static): {clashes}"


def test_philox_fill_is_bit_identical_to_the_cpu(build):
    """kernels/cuda/philox.cu, run by the emulator, against kernels/cpu/philox.c: the same stream, bit for bit."""
    exe = build(r"""
#include "cpu/philox.h"
int main() {
    const int64_t sizes[] = {1, 3, 4, 7, 1000, 4099};
    const gm_dtype dts[] = {GM_F32, GM_F64, GM_F16, GM_BF16};
    const double ranges[][2] = {{0.0, 1.0}, {-2.0, 3.0}, {0.5, 0.5000001}};
    for (gm_dtype dt : dts)
        for (int dist = 0; dist < 2; dist++)
            for (auto &ab : ranges)
                for (int64_t n : sizes) {
                    size_t bytes = n * gm_dtype_size(dt);
                    std::vector<unsigned char> cpu(bytes), gpu(bytes);
                    CHECK(gm_philox_fill(cpu.data(), dt, dist, n, 1234, 77, ab[0], ab[1], 1) == GM_OK);
                    void *d;
                    char err[256];
                    CU(cudaMalloc(&d, bytes));
                    CHECK(gm_philox_fill_cuda(d, dt, dist, n, 1234, 77, ab[0], ab[1], 0, NULL, err, sizeof err) ==
                          GM_OK);
                    CU(cudaMemcpy(gpu.data(), d, bytes, cudaMemcpyDeviceToHost));
                    CHECK(!memcmp(cpu.data(), gpu.data(), bytes));
                    CU(cudaFree(d));
                }
    printf("OK\n");
}
""", extra=[os.path.join(KERNELS, "cuda", "philox.cu"), os.path.join(KERNELS, "cpu", "philox.c")])
    run(exe)


# ---- cost --------------------------------------------------------------------------------------------------------
def test_launch_overhead(build):
    exe = build(r"""
#include <algorithm>
#include <chrono>
#include "cuda/cuda_common.cuh"
__global__ void axpy(float *y, const float *x, float a, int64_t n) { GM_CU_GRID_STRIDE(i, n) y[i] += a * x[i]; }
__global__ void reduce(const float *x, int64_t n, float *out) {
    float acc = 0;
    GM_CU_GRID_STRIDE(i, n) acc += x[i];
    float r = gm_cu_block_reduce(acc, gm_cu_sum());
    if (threadIdx.x == 0) atomicAdd(out, r);
}
template <class F> double median_us(F f, int reps) {
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
int main() {
    gm_cuda_ctx ctx = {};
    const int64_t n = 1024;
    float *x, *y, *o;
    CU(cudaMalloc(&x, n * 4));
    CU(cudaMalloc(&y, n * 4));
    CU(cudaMalloc(&o, 4));
    CU(cudaMemset(x, 0, n * 4));
    CU(cudaMemset(y, 0, n * 4));
    double plain = median_us([&] { GM_LAUNCH(axpy, 4, 256, &ctx, y, x, 2.0f, n); }, 200);
    double red = median_us([&] { GM_LAUNCH(reduce, 4, 256, &ctx, x, n, o); }, 20);
    CU(cudaGetLastError());
    printf("no-barrier launch 4x256: %.1f us\nblock-reduce launch 4x256 (9 barriers): %.1f us\n", plain, red);
    CHECK(plain < 1000.0);
    printf("OK\n");
}
""")
    print(run(exe))
