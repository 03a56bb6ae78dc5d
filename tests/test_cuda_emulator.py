"""The CUDA emulator (kernels/cuda/emu/): small .cu programs are compiled by g++ against its headers, exactly as
setup.py compiles kernels/cuda/*.cu in a GPUMEMNET_CUDA=emu build, linked with its runtime and run.

What is checked: the scheduler (grid-stride coverage, built-in variables in 1-3 d, __syncthreads in shared-memory
reductions, divergent barriers reported as a sticky launch failure that gm_emu_reset clears, bad launch
configurations, traps), atomics, kernel arguments, memory (capacity, cudaMemGetInfo, poison, checked frees and
copies), streams and events, the per-thread current device, half/bfloat16 rounding against NumPy, the rules a
compile error enforces, and that the real kernels/cuda/*.cu files build and run (Philox bit-identical to the CPU).
Needs only a C++17 compiler; no GPU, no gpumemnet build."""
import glob
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "kernels")
EMU = os.path.join(KERNELS, "cuda", "emu")
INC = os.path.join(EMU, "include")

CXX = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
CC = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
pytestmark = pytest.mark.skipif(not CXX, reason="no C++ compiler (g++ or c++, or $CXX) found: the emulator is C++17")

DEFS = ["-DGM_WITH_CUDA=1", "-DGM_CUDA_EMU=1", f"-I{INC}", f"-I{KERNELS}"]
# setup.py's flags for the emulated .cu files (compile_emulated)
CXXFLAGS = ["-std=c++17", "-O2", "-fPIC", "-Wall", "-Wno-unused-function", "-Wno-unknown-pragmas"] + DEFS

PRELUDE = r"""
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            printf("FAIL line %d: %s (last message: %s)\n", __LINE__, #cond, gm_emu_last_message()); \
            return 1;                                                                                 \
        }                                                                                             \
    } while (0)
#define CU(call) CHECK((call) == cudaSuccess)
"""


def compile_cmd(src, obj):
    if src.endswith(".c"):
        return [CC, "-std=c11", "-O2", "-fPIC", "-Wall", "-Wno-unknown-pragmas", "-c", src, "-o", obj] + DEFS
    return [CXX, "-x", "c++", "-c", src, "-o", obj] + CXXFLAGS


def compile_one(src, obj):
    r = subprocess.run(compile_cmd(src, obj), capture_output=True, text=True)
    assert r.returncode == 0, f"compiling {src} failed:\n{r.stderr}"
    return obj


@pytest.fixture(scope="session")
def runtime(tmp_path_factory):
    """The emulator's own objects (emu/*.cpp but the *_emu.cpp stand-ins of cuDNN/cuBLAS files)."""
    d = tmp_path_factory.mktemp("emu_runtime")
    srcs = [s for s in sorted(glob.glob(os.path.join(EMU, "*.cpp"))) if not s.endswith("_emu.cpp")]
    return [compile_one(s, str(d / (os.path.basename(s) + ".o"))) for s in srcs]


@pytest.fixture(scope="session")
def build(tmp_path_factory, runtime):
    """build(source, extra_sources=()) -> an executable of PRELUDE + source linked with the emulator (and the extra
    sources, compiled as setup.py would); each distinct program is built once per session."""
    built = {}

    def _build(source, extra=()):
        key = (source, tuple(extra))
        if key in built:
            return built[key]
        d = tmp_path_factory.mktemp("prog")
        src = d / "prog.cu"
        src.write_text(PRELUDE + source)
        objs = [compile_one(str(src), str(d / "prog.o"))]
        objs += [compile_one(s, str(d / (os.path.basename(s) + ".o"))) for s in extra]
        exe = str(d / "prog")
        r = subprocess.run([CXX, "-o", exe] + objs + runtime + ["-lpthread", "-lm"], capture_output=True, text=True)
        assert r.returncode == 0, f"linking failed:\n{r.stderr}"
        built[key] = exe
        return exe
    return _build


def run(exe, *args, env=None):
    """Runs a test program with a clean emulator environment plus `env`; asserts it printed OK; returns stdout."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMNET_EMU_")}
    e.update(env or {})
    r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("OK"), \
        f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


# ---- the scheduler -----------------------------------------------------------------------------------------------
# Kernels must not depend on the order of blocks or threads: the order-independent tests run in three orders.
SCHEDULES = ["forward", "reverse", "random:12345"]

@pytest.mark.parametrize("schedule", SCHEDULES)
def test_grid_stride_loops_cover_every_element_once(build, schedule):
    exe = build(r"""
#include "cuda/cuda_common.cuh"
__global__ void mark(int *hits, int64_t n) { GM_CU_GRID_STRIDE(i, n) hits[i] += 1; }
int main() {
    gm_cuda_ctx ctx = {};
    ctx.sm_count = 4;
    const int64_t sizes[] = {1, 255, 256, 257, 1000, 4096, 100003};
    const unsigned blocks[] = {1, 32, 100, 256, 1024};
    for (int64_t n : sizes) {
        const unsigned grids[] = {1, 3, 4, gm_cu_blocks(n, &ctx)};
        for (unsigned g : grids)
            for (unsigned b : blocks) {
                int *d;
                CU(cudaMalloc(&d, n * sizeof(int)));
                CU(cudaMemset(d, 0, n * sizeof(int)));
                GM_LAUNCH(mark, g, b, &ctx, d, n);
                CU(cudaGetLastError());
                std::vector<int> h(n);
                CU(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
                for (int64_t i = 0; i < n; i++) CHECK(h[i] == 1);
                CU(cudaFree(d));
            }
    }
    printf("OK\n");
}
""")
    run(exe, env={"GPUMEMNET_EMU_SCHEDULE": schedule})


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_shared_memory_reductions_with_syncthreads(build, schedule):
    exe = build(r"""
#include "cuda/cuda_common.cuh"
/* cuda_common.cuh's block reduction (256 threads), then one partial per block */
__global__ void block_sums(const float *x, int64_t n, float *partial) {
    float acc = 0;
    GM_CU_GRID_STRIDE(i, n) acc += x[i];
    float r = gm_cu_block_reduce(acc, gm_cu_sum());
    if (threadIdx.x == 0) partial[blockIdx.x] = r;
}
/* a hand-written tree over a 2-d block (16 x 8), several reductions in a row reusing the shared array */
__global__ void tree2d(const int *x, int *out, int rounds) {
    __shared__ int s[128];
    const int t = threadIdx.y * blockDim.x + threadIdx.x;
    for (int r = 0; r < rounds; r++) {
        s[t] = x[blockIdx.x * 128 + t] * (r + 1);
        __syncthreads();
        for (int w = 64; w > 0; w >>= 1) {
            if (t < w) s[t] += s[t + w];
            __syncthreads();
        }
        if (t == 0) out[blockIdx.x * rounds + r] = s[0];
        __syncthreads();
    }
}
int main() {
    gm_cuda_ctx ctx = {};
    const int64_t n = 5000;
    std::vector<float> hx(n);
    double ref = 0;
    for (int64_t i = 0; i < n; i++) ref += hx[i] = (float)(i % 13) - 6.0f;
    float *x, *partial;
    CU(cudaMalloc(&x, n * 4));
    CU(cudaMalloc(&partial, 4 * 4));
    CU(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
    GM_LAUNCH(block_sums, 4, GM_CU_THREADS, &ctx, x, n, partial);
    CU(cudaGetLastError());
    float hp[4];
    CU(cudaMemcpy(hp, partial, sizeof hp, cudaMemcpyDeviceToHost));
    double got = 0;
    for (int b = 0; b < 4; b++) { /* block b summed i = b*256 + t + k*1024 */
        double want = 0;
        for (int64_t i = b * 256; i < n; i += 1024)
            for (int64_t j = i; j < i + 256 && j < n; j++) want += hx[j];
        CHECK(hp[b] == (float)want);
        got += hp[b];
    }
    CHECK(got == ref);

    const int nb = 5, rounds = 3;
    std::vector<int> hi(nb * 128);
    for (int i = 0; i < nb * 128; i++) hi[i] = i * 7 % 31;
    int *xi, *out;
    CU(cudaMalloc(&xi, hi.size() * 4));
    CU(cudaMalloc(&out, nb * rounds * 4));
    CU(cudaMemcpy(xi, hi.data(), hi.size() * 4, cudaMemcpyHostToDevice));
    GM_LAUNCH(tree2d, nb, dim3(16, 8), &ctx, xi, out, rounds);
    CU(cudaGetLastError());
    std::vector<int> ho(nb * rounds);
    CU(cudaMemcpy(ho.data(), out, ho.size() * 4, cudaMemcpyDeviceToHost));
    for (int b = 0; b < nb; b++) {
        int want = 0;
        for (int t = 0; t < 128; t++) want += hi[b * 128 + t];
        for (int r = 0; r < rounds; r++) CHECK(ho[b * rounds + r] == want * (r + 1));
    }
    printf("OK\n");
}
""")
    run(exe, env={"GPUMEMNET_EMU_SCHEDULE": schedule})


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_builtin_variables_in_1d_2d_3d(build, schedule):
    exe = build(r"""
struct Rec { unsigned t[3], b[3], bd[3], gd[3], after[3]; int seen; };
__global__ void record(Rec *out) {
    const unsigned nt = blockDim.x * blockDim.y * blockDim.z;
    const unsigned tl = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned bl = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    Rec &r = out[bl * nt + tl];
    r.t[0] = threadIdx.x; r.t[1] = threadIdx.y; r.t[2] = threadIdx.z;
    r.b[0] = blockIdx.x; r.b[1] = blockIdx.y; r.b[2] = blockIdx.z;
    r.bd[0] = blockDim.x; r.bd[1] = blockDim.y; r.bd[2] = blockDim.z;
    r.gd[0] = gridDim.x; r.gd[1] = gridDim.y; r.gd[2] = gridDim.z;
    r.seen++;
    __syncthreads(); /* other fibers ran meanwhile: the variables must be this thread's again */
    r.after[0] = threadIdx.x; r.after[1] = threadIdx.y; r.after[2] = threadIdx.z;
}
int main() {
    const dim3 grids[] = {dim3(3), dim3(2, 3), dim3(2, 3, 4), dim3(1, 1, 2)};
    const dim3 blocks[] = {dim3(5), dim3(4, 2, 3), dim3(8, 8), dim3(1, 1, 64), dim3(1024)};
    for (dim3 g : grids)
        for (dim3 b : blocks) {
            const unsigned nt = b.x * b.y * b.z, nb = g.x * g.y * g.z;
            Rec *d;
            CU(cudaMalloc(&d, sizeof(Rec) * nt * nb));
            CU(cudaMemset(d, 0, sizeof(Rec) * nt * nb));
            gm_emu_launch(record, g, b, d);
            CU(cudaGetLastError());
            std::vector<Rec> h(nt * nb);
            CU(cudaMemcpy(h.data(), d, sizeof(Rec) * nt * nb, cudaMemcpyDeviceToHost));
            for (unsigned i = 0; i < nt * nb; i++) {
                const Rec &r = h[i];
                unsigned tl = i % nt, bl = i / nt;
                CHECK(r.seen == 1);
                CHECK(r.t[0] == tl % b.x && r.t[1] == tl / b.x % b.y && r.t[2] == tl / (b.x * b.y));
                CHECK(r.b[0] == bl % g.x && r.b[1] == bl / g.x % g.y && r.b[2] == bl / (g.x * g.y));
                CHECK(r.bd[0] == b.x && r.bd[1] == b.y && r.bd[2] == b.z);
                CHECK(r.gd[0] == g.x && r.gd[1] == g.y && r.gd[2] == g.z);
                CHECK(!memcmp(r.after, r.t, sizeof r.t));
            }
            CU(cudaFree(d));
        }
    CHECK(warpSize == 32);
    printf("OK\n");
}
""")
    run(exe, env={"GPUMEMNET_EMU_SCHEDULE": schedule})


def test_divergent_syncthreads_is_a_sticky_launch_failure(build):
    exe = build(r"""
__global__ void early_return(int *p) {
    if (blockIdx.x == 2 && threadIdx.x == 3) return; /* one thread of block 2 skips the barrier */
    __syncthreads();
    p[blockIdx.x] = 1;
}
__global__ void uneven_loop(int *p) { /* half the threads pass one barrier more than the others */
    for (unsigned i = 0; i < (threadIdx.x < 16 ? 2u : 3u); i++) __syncthreads();
    p[0] = 1;
}
__global__ void uniform_skip(int *p, int n) { /* every thread skips it: fine */
    if (n > 100) __syncthreads();
    p[threadIdx.x] = n;
}
int main() {
    int *p;
    CU(cudaMalloc(&p, 64 * 4));
    CU(cudaMemset(p, 0, 64 * 4));
    gm_emu_launch(early_return, dim3(4), dim3(32), p);
    cudaError_t e = cudaGetLastError();
    CHECK(e == cudaErrorLaunchFailure);
    CHECK(strstr(cudaGetErrorString(e), "divergent __syncthreads()"));
    CHECK(strstr(gm_emu_last_message(), "block (2,0,0)"));
    CHECK(strstr(gm_emu_last_message(), "thread (3,0,0)"));
    printf("message: %s\n", cudaGetErrorString(e));
    int h[4];
    /* sticky: every later call fails, the error is reported again and again, nothing runs */
    CHECK(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost) == cudaErrorLaunchFailure);
    void *q;
    CHECK(cudaMalloc(&q, 16) == cudaErrorLaunchFailure);
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(cudaPeekAtLastError() == cudaErrorLaunchFailure);
    gm_emu_launch(uniform_skip, dim3(1), dim3(32), p, 7);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    gm_emu_reset();
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost));
    /* blocks run in order: 0 and 1 finished, 2 failed, 3 never ran; uniform_skip did not run either */
    CHECK(h[0] == 1 && h[1] == 1 && h[2] == 0 && h[3] == 0);

    gm_emu_launch(uneven_loop, dim3(1), dim3(32), p);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(strstr(gm_emu_last_message(), "16 thread(s) wait"));
    gm_emu_reset();

    gm_emu_launch(uniform_skip, dim3(1), dim3(32), p, 7);
    CU(cudaGetLastError());
    CU(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 7 && h[3] == 7);
    printf("OK\n");
}
""")
    out = run(exe)
    assert "divergent __syncthreads()" in out


def test_bad_launch_configuration(build):
    exe = build(r"""
__global__ void touch(int *p) { atomicAdd(p, 1); }
int main() {
    int *p, h;
    CU(cudaMalloc(&p, 4));
    CU(cudaMemset(p, 0, 4));
    struct { dim3 g, b; } bad[] = {
        {dim3(1), dim3(0)}, {dim3(1), dim3(1025)}, {dim3(1), dim3(33, 32)}, {dim3(1), dim3(1, 1, 65)},
        {dim3(1), dim3(2, 2, 257)}, {dim3(0), dim3(32)}, {dim3(1, 0), dim3(32)}, {dim3(1, 65536), dim3(32)},
        {dim3(1, 1, 65536), dim3(32)}, {dim3(0x80000000u), dim3(32)}};
    for (auto &c : bad) {
        gm_emu_launch(touch, c.g, c.b, p);
        CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
        CHECK(strstr(gm_emu_last_message(), "block ("));
        CU(cudaGetLastError()); /* not sticky */
    }
    CU(cudaMemcpy(&h, p, 4, cudaMemcpyDeviceToHost));
    CHECK(h == 0); /* none of them ran */
    struct { dim3 g, b; } good[] = {{dim3(1), dim3(1024)}, {dim3(1), dim3(32, 32)}, {dim3(1), dim3(1, 1, 64)},
                                    {dim3(2, 65535), dim3(1)}, {dim3(1, 1, 3), dim3(2, 2, 2)}};
    int want = 0;
    for (auto &c : good) {
        gm_emu_launch(touch, c.g, c.b, p);
        CU(cudaGetLastError());
        want += c.g.x * c.g.y * c.g.z * c.b.x * c.b.y * c.b.z;
    }
    CU(cudaMemcpy(&h, p, 4, cudaMemcpyDeviceToHost));
    CHECK(h == want);
    printf("OK\n");
}
""")
    run(exe)


def test_trap_and_exceptions_fail_the_launch(build):
    exe = build(r"""
#include <stdexcept>
__global__ void trapping(int *p) {
    if (blockIdx.x == 1 && threadIdx.x == 5) __trap();
    __syncthreads();
    p[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}
__global__ void throwing(int *p) {
    if (threadIdx.x == 2) throw std::runtime_error("boom");
    p[threadIdx.x] = 2;
}
__global__ void fine(int *p) { p[threadIdx.x] = 3; }
int main() {
    int *p;
    CU(cudaMalloc(&p, 64 * 4));
    unsigned long long launches = gm_emu_launch_count();
    gm_emu_launch(trapping, dim3(3), dim3(16), p);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(strstr(gm_emu_last_message(), "__trap()") && strstr(gm_emu_last_message(), "block (1,0,0)"));
    gm_emu_reset();
    gm_emu_launch(throwing, dim3(1), dim3(8), p);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(strstr(gm_emu_last_message(), "boom"));
    gm_emu_reset();
    /* the recycled fibers work */
    for (int i = 0; i < 3; i++) {
        gm_emu_launch(trapping, dim3(1), dim3(64), p);
        CU(cudaGetLastError());
    }
    gm_emu_launch(fine, dim3(1), dim3(64), p);
    CU(cudaGetLastError());
    int h[64];
    CU(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) CHECK(h[i] == 3);
    CHECK(gm_emu_launch_count() == launches + 6);
    printf("OK\n");
}
""")
    run(exe)


def test_kernel_arguments_convert_and_are_per_thread_copies(build):
    exe = build(r"""
#include "cuda/cuda_common.cuh"
__global__ void args(int *out, int n, const float *maybe, gm_cu_geom<2> g, double d, char c) {
    out[0] = n;
    out[1] = maybe == nullptr;
    out[2] = g.ndim;
    out[3] = (int)g.shape[0];
    out[4] = (int)(d * 10);
    out[5] = c;
}
__global__ void own_copy(int n, int *out) {
    if (threadIdx.x == 0) n = 99; /* a thread's parameters are its own */
    __syncthreads();
    out[threadIdx.x] = n;
}
int main() {
    gm_cuda_ctx ctx = {};
    int *out;
    CU(cudaMalloc(&out, 64 * 4));
    const int64_t shape[2] = {6, 7}, s0[2] = {28, 4}, s1[2] = {0, 4};
    const int64_t *const strides[2] = {s0, s1};
    gm_cu_geom<2> g = gm_cu_geom_make<2>(2, shape, strides);
    int64_t n = 41; /* int64_t -> int, literal 0 -> pointer, float -> double, int -> char: as a real launch */
    GM_LAUNCH(args, 1, 1, &ctx, out, n, 0, g, 2.5f, 65);
    CU(cudaGetLastError());
    int h[64];
    CU(cudaMemcpy(h, out, 6 * 4, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 41 && h[1] == 1 && h[2] == 2 && h[3] == 6 && h[4] == 25 && h[5] == 65);
    GM_LAUNCH(own_copy, 1, 64, &ctx, 5, out);
    CU(cudaGetLastError());
    CU(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 99);
    for (int i = 1; i < 64; i++) CHECK(h[i] == 5);
    printf("OK\n");
}
""")
    run(exe)


def test_missing_barrier_shows_up_in_another_schedule(build):
    """A read of another thread's shared write without a __syncthreads between them is a race: the result depends
    on which thread runs first. Forward order alone would hide it; reverse order exposes it."""
    exe = build(r"""
__global__ void neighbours(int *out, int with_barrier, int salt) {
    __shared__ int s[64];
    s[threadIdx.x] = (int)threadIdx.x + salt;
    if (with_barrier) __syncthreads(); /* uniform: every thread takes the same branch */
    out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}
int main() {
    int *d, h[64];
    CU(cudaMalloc(&d, sizeof h));
    for (int with = 1; with >= 0; with--) {
        CU(cudaMemset(d, 0, sizeof h));
        const int salt = with ? 1 : 1000; /* shared memory keeps the last launch's values here: differ */
        gm_emu_launch(neighbours, dim3(1), dim3(64), d, with, salt);
        CU(cudaGetLastError());
        CU(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        int right = 0;
        for (int t = 0; t < 64; t++) right += h[t] == (t + 1) % 64 + salt;
        printf("barrier %d: %d of 64 right\n", with, right);
    }
    printf("OK\n");
}
""")
    for schedule in SCHEDULES:
        assert "barrier 1: 64 of 64 right" in run(exe, env={"GPUMEMNET_EMU_SCHEDULE": schedule})
    fwd = run(exe, env={"GPUMEMNET_EMU_SCHEDULE": "forward"})
    rev = run(exe, env={"GPUMEMNET_EMU_SCHEDULE": "reverse"})
    assert "barrier 0: 64 of 64 right" not in fwd + rev  # the race is visible in at least one order


def test_pointer_arguments_must_be_device_memory(build):
    exe = build(r"""
__global__ void copy(float *dst, const float *src, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}
__global__ void optional(float *dst, const float *bias, const float *end) { dst[threadIdx.x] = bias ? 1.0f : 2.0f; (void)end; }
int main(int argc, char **argv) {
    float host[16] = {0}, *d, *d2, *pinned, h[16];
    CU(cudaMalloc(&d, sizeof host));
    CU(cudaMalloc(&d2, sizeof host));
    CU(cudaMallocHost(&pinned, sizeof host));
    if (!strcmp(argv[1], "off")) { /* GPUMEMNET_EMU_CHECK_POINTERS=0 */
        gm_emu_launch(copy, dim3(1), dim3(16), d, (const float *)host, 16);
        CU(cudaGetLastError());
        printf("OK\n");
        return 0;
    }
    /* NULL, one past the end of a block (an end pointer) and pinned host memory are fine */
    gm_emu_launch(optional, dim3(1), dim3(16), d, (const float *)NULL, (const float *)(d2 + 16));
    CU(cudaGetLastError());
    gm_emu_launch(copy, dim3(1), dim3(16), d, (const float *)pinned, 16);
    CU(cudaGetLastError());
    /* a host array: a GPU would fault; here the launch fails the same way before anything runs */
    CU(cudaMemset(d, 0, sizeof host));
    gm_emu_launch(copy, dim3(1), dim3(16), d, (const float *)host, 16);
    cudaError_t e = cudaGetLastError();
    CHECK(e == cudaErrorIllegalAddress);
    CHECK(strstr(cudaGetErrorString(e), "kernel argument 2"));
    CHECK(strstr(gm_emu_last_message(), "not device memory"));
    CHECK(cudaDeviceSynchronize() == cudaErrorIllegalAddress); /* sticky */
    gm_emu_reset();
    CU(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 0.0f);
    /* freed memory */
    CU(cudaFree(d2));
    gm_emu_launch(copy, dim3(1), dim3(16), d, (const float *)d2, 16);
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
    gm_emu_reset();
    /* another device's memory */
    float *other;
    CU(cudaSetDevice(1));
    CU(cudaMalloc(&other, sizeof host));
    CU(cudaSetDevice(0));
    gm_emu_launch(copy, dim3(1), dim3(16), other, (const float *)d, 16);
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
    CHECK(strstr(gm_emu_last_message(), "memory of device 1, but the kernel runs on device 0"));
    gm_emu_reset();
    printf("OK\n");
}
""")
    run(exe, "on", env={"GPUMEMNET_EMU_DEVICES": "2"})
    run(exe, "off", env={"GPUMEMNET_EMU_DEVICES": "2", "GPUMEMNET_EMU_CHECK_POINTERS": "0"})


def test_writes_outside_a_block_are_caught_after_the_launch(build):
    exe = build(r"""
__global__ void fill(float *p, int from, int to) {
    for (int i = from + (int)threadIdx.x; i < to; i += blockDim.x) p[i] = 1.0f;
}
int main() {
    float *p, *q;
    CU(cudaMalloc(&p, 16 * sizeof(float)));
    CU(cudaMalloc(&q, 16 * sizeof(float)));
    gm_emu_launch(fill, dim3(1), dim3(32), p, 0, 16); /* in bounds */
    CU(cudaGetLastError());
    gm_emu_launch(fill, dim3(1), dim3(32), p, 0, 17); /* one element too far */
    cudaError_t e = cudaGetLastError();
    CHECK(e == cudaErrorIllegalAddress);
    CHECK(strstr(gm_emu_last_message(), "at byte offset 64, past its end"));
    CHECK(strstr(cudaGetErrorString(e), "an illegal memory access was encountered"));
    CHECK(cudaDeviceSynchronize() == cudaErrorIllegalAddress);
    gm_emu_reset();
    gm_emu_launch(fill, dim3(1), dim3(32), q, -2, 3); /* a negative index */
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
    CHECK(strstr(gm_emu_last_message(), "at byte offset -8, before its start"));
    gm_emu_reset();
    gm_emu_launch(fill, dim3(1), dim3(32), q, 0, 16); /* the zones were restored: reported once */
    CU(cudaGetLastError());
    printf("OK\n");
}
""")
    run(exe)


def test_portable_context_switch(tmp_path):
    """Off x86-64 the fibers switch with glibc's swapcontext (GM_EMU_UCONTEXT forces it here): barriers, traps
    and divergence must behave the same."""
    objs = []
    for s in sorted(glob.glob(os.path.join(EMU, "*.cpp"))):
        if not s.endswith("_emu.cpp"):
            obj = str(tmp_path / (os.path.basename(s) + ".o"))
            r = subprocess.run(compile_cmd(s, obj) + ["-DGM_EMU_UCONTEXT"], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            objs.append(obj)
    src = tmp_path / "prog.cu"
    src.write_text(PRELUDE + r"""
#include "cuda/cuda_common.cuh"
__global__ void sums(const float *x, float *out) {
    float r = gm_cu_block_reduce(x[blockIdx.x * 256 + threadIdx.x], gm_cu_sum());
    if (threadIdx.x == 0) out[blockIdx.x] = r;
}
__global__ void diverge(int *p) { if (threadIdx.x == 7) __trap(); if (threadIdx.x) __syncthreads(); }
int main() {
    std::vector<float> h(4 * 256);
    for (int i = 0; i < 4 * 256; i++) h[i] = (float)(i % 10);
    float *x, *o, r[4];
    CU(cudaMalloc(&x, h.size() * 4));
    CU(cudaMalloc(&o, sizeof r));
    CU(cudaMemcpy(x, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 3; rep++) {
        gm_emu_launch(sums, dim3(4), dim3(256), (const float *)x, o);
        CU(cudaGetLastError());
        CU(cudaMemcpy(r, o, sizeof r, cudaMemcpyDeviceToHost));
        for (int b = 0; b < 4; b++) {
            float want = 0;
            for (int t = 0; t < 256; t++) want += h[b * 256 + t];
            CHECK(r[b] == want);
        }
        gm_emu_launch(diverge, dim3(1), dim3(16), (int *)o);
        CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
        CHECK(strstr(gm_emu_last_message(), "__trap"));
        gm_emu_reset();
    }
    printf("OK\n");
}
""")
    obj = str(tmp_path / "prog.o")
    compile_one(str(src), obj)
    exe = str(tmp_path / "prog")
    r = subprocess.run([CXX, "-o", exe, obj] + objs + ["-lpthread"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    run(exe)


# ---- atomics -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_atomics(build, schedule):
    exe = build(r"""
#include <limits.h>
struct Acc {
    int i_add, i_max, i_min, i_or, i_and, cas_sum, shared_count[4];
    unsigned u_add, u_max, u_min, u_or, u_and, u_xor;
    unsigned long long ull_add, ull_max, ull_min;
    long long ll_max, ll_min;
    float f_add;
    double d_add;
    int exch;
};
__global__ void hammer(Acc *a, int *tickets, int *exch_old) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    tickets[atomicAdd(&a->i_add, 1)] += 1; /* each old value exactly once */
    atomicAdd(&a->u_add, 2u);
    atomicAdd(&a->ull_add, 1ull << 33);
    atomicAdd(&a->f_add, 0.5f);
    atomicAdd(&a->d_add, 0.25);
    atomicMax(&a->i_max, g - 500);
    atomicMin(&a->i_min, g - 500);
    atomicMax(&a->u_max, (unsigned)g * 3u);
    atomicMin(&a->u_min, (unsigned)g + 7u);
    atomicMax(&a->ll_max, (1ll << 40) * (g - 512));
    atomicMin(&a->ll_min, (1ll << 40) * (g - 512));
    atomicMax(&a->ull_max, (1ull << 50) + g);
    atomicMin(&a->ull_min, (1ull << 50) + g);
    atomicOr(&a->i_or, 1 << (g % 31));
    atomicAnd(&a->i_and, ~(1 << (g % 31)));
    atomicOr(&a->u_or, 1u << (g % 32));
    atomicAnd(&a->u_and, ~(1u << (g % 32)));
    atomicXor(&a->u_xor, 1u << (g % 32));
    int old = a->cas_sum, seen;
    while ((seen = atomicCAS(&a->cas_sum, old, old + g)) != old) old = seen; /* the classic CAS loop */
    exch_old[g] = atomicExch(&a->exch, g + 1);
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    atomicAdd(&count, 1);
    __syncthreads();
    if (threadIdx.x == 0) a->shared_count[blockIdx.x] = count;
}
__global__ void edge_cases(int *out) {
    int x = INT_MAX;
    out[0] = atomicAdd(&x, 1) == INT_MAX && x == INT_MIN; /* wraps like the hardware */
    unsigned u = 5;
    out[1] = atomicCAS(&u, 4u, 9u) == 5u && u == 5u; /* no match: unchanged */
    out[2] = atomicCAS(&u, 5u, 9u) == 5u && u == 9u;
    unsigned inc = 3;
    atomicInc(&inc, 3u);
    out[3] = inc == 0; /* wraps to 0 past val */
    unsigned dec = 0;
    atomicDec(&dec, 7u);
    out[4] = dec == 7; /* 0 wraps to val */
    float f = 1.0f;
    out[5] = atomicExch(&f, 2.5f) == 1.0f && f == 2.5f;
    int s = 10;
    out[6] = atomicSub(&s, 3) == 10 && s == 7;
}
int main() {
    const int nb = 4, nt = 256, n = nb * nt;
    Acc init;
    memset(&init, 0, sizeof init);
    init.i_max = INT_MIN; init.i_min = INT_MAX; init.i_and = -1;
    init.u_min = ~0u; init.u_and = ~0u;
    init.ll_max = LLONG_MIN; init.ll_min = LLONG_MAX; init.ull_min = ~0ull;
    Acc *a;
    int *tickets, *exch_old;
    CU(cudaMalloc(&a, sizeof(Acc)));
    CU(cudaMalloc(&tickets, n * 4));
    CU(cudaMalloc(&exch_old, n * 4));
    CU(cudaMemcpy(a, &init, sizeof init, cudaMemcpyHostToDevice));
    CU(cudaMemset(tickets, 0, n * 4));
    gm_emu_launch(hammer, dim3(nb), dim3(nt), a, tickets, exch_old);
    CU(cudaGetLastError());
    Acc r;
    std::vector<int> t(n), eo(n);
    CU(cudaMemcpy(&r, a, sizeof r, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(t.data(), tickets, n * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(eo.data(), exch_old, n * 4, cudaMemcpyDeviceToHost));
    CHECK(r.i_add == n);
    for (int i = 0; i < n; i++) CHECK(t[i] == 1);
    CHECK(r.u_add == 2u * n && r.ull_add == (unsigned long long)n << 33);
    CHECK(r.f_add == 0.5f * n && r.d_add == 0.25 * n);
    CHECK(r.i_max == n - 1 - 500 && r.i_min == -500);
    CHECK(r.u_max == 3u * (n - 1) && r.u_min == 7u);
    CHECK(r.ll_max == (1ll << 40) * (n - 1 - 512) && r.ll_min == (1ll << 40) * -512);
    CHECK(r.ull_max == (1ull << 50) + n - 1 && r.ull_min == 1ull << 50);
    CHECK(r.i_or == 0x7fffffff && r.i_and == (int)0x80000000);
    CHECK(r.u_or == ~0u && r.u_and == 0u && r.u_xor == 0u); /* every bit flipped n/32 (even) times */
    CHECK(r.cas_sum == n * (n - 1) / 2);
    /* atomicExch: the old values and the final one are each value written (and the initial 0) once */
    std::vector<int> seen(n + 1, 0);
    for (int i = 0; i < n; i++) seen[eo[i]]++;
    seen[r.exch]++;
    for (int v = 0; v <= n; v++) CHECK(seen[v] == 1);
    for (int b = 0; b < nb; b++) CHECK(r.shared_count[b] == nt);
    int *o, h[7];
    CU(cudaMalloc(&o, sizeof h));
    gm_emu_launch(edge_cases, dim3(1), dim3(1), o);
    CU(cudaGetLastError());
    CU(cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 7; i++) CHECK(h[i] == 1);
    printf("OK\n");
}
""")
    run(exe, env={"GPUMEMNET_EMU_SCHEDULE": schedule})


# ---- memory ------------------------------------------------------------------------------------------------------
MEMORY_PROGRAM = r"""
int main(int argc, char **argv) {
    const char *mode = argv[1];
    int count = -1;
    if (!strcmp(mode, "bad-env")) {
        CHECK(cudaGetDeviceCount(&count) == cudaErrorInitializationError && count == 0);
        CHECK(strstr(gm_emu_last_message(), "GPUMEMNET_EMU_"));
        void *p;
        CHECK(cudaMalloc(&p, 4) == cudaErrorInitializationError);
        printf("OK\n");
        return 0;
    }
    if (!strcmp(mode, "no-device")) {
        CHECK(cudaGetDeviceCount(&count) == cudaErrorNoDevice && count == 0);
        void *p;
        CHECK(cudaMalloc(&p, 4) == cudaErrorNoDevice);
        CHECK(cudaSetDevice(0) == cudaErrorNoDevice);
        printf("OK\n");
        return 0;
    }
    size_t fr, total;
    CU(cudaMemGetInfo(&fr, &total));
    if (!strcmp(mode, "total")) {
        printf("total %zu\n", total);
        unsigned char *p;
        CU(cudaMalloc(&p, 1000));
        printf("poison %d\n", p[0] == p[999] ? p[0] : -1);
        printf("OK\n");
        return 0;
    }
    /* mode "limits": GPUMEMNET_EMU_MEMORY=1M */
    const size_t cap = 1 << 20;
    CHECK(fr == cap && total == cap);
    unsigned char *a, *b, *c;
    CU(cudaMalloc(&a, 600000));
    CHECK((uintptr_t)a % 512 == 0);
    for (int i = 0; i < 600000; i++) CHECK(a[i] == 0xCD); /* poisoned, so uninitialised reads show */
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == cap - 600000 && total == cap);
    b = (unsigned char *)0x1;
    CHECK(cudaMalloc(&b, 500000) == cudaErrorMemoryAllocation);
    CHECK(b == NULL);
    CHECK(strstr(gm_emu_last_message(), "600000 of its 1048576 bytes"));
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
    CU(cudaGetLastError()); /* not sticky: the allocator frees its cache and retries */
    CU(cudaMalloc(&b, cap - 600000)); /* exactly what is left */
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == 0);
    CHECK(cudaMalloc(&c, 1) == cudaErrorMemoryAllocation);
    CU(cudaFree(a));
    CU(cudaMalloc(&c, 1));
    CU(cudaFree(c));
    CHECK(cudaFree(a) == cudaErrorInvalidDevicePointer); /* double free */
    CHECK(cudaFree(b + 8) == cudaErrorInvalidDevicePointer); /* inside a block */
    CHECK(strstr(gm_emu_last_message(), "8 bytes into"));
    int local;
    CHECK(cudaFree(&local) == cudaErrorInvalidDevicePointer);
    CHECK(cudaGetLastError() == cudaErrorInvalidDevicePointer);
    CU(cudaGetLastError());
    CU(cudaFree(NULL));
    CU(cudaFree(b));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == cap);
    void *z = (void *)0x1;
    CU(cudaMalloc(&z, 0));
    CHECK(z == NULL);
    /* pinned host memory does not count against the device */
    void *h;
    CU(cudaMallocHost(&h, 4 << 20));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == cap);
    CU(cudaFreeHost(h));
    CHECK(cudaFreeHost(h) == cudaErrorInvalidValue);
    CU(cudaHostAlloc(&h, 64, cudaHostAllocDefault));
    CU(cudaFreeHost(h));
    /* capacity can change at run time (tests), properties follow */
    CU(gm_emu_set_device_memory(0, 4096));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == 4096 && total == 4096);
    CHECK(cudaMalloc(&a, 4097) == cudaErrorMemoryAllocation);
    CHECK(gm_emu_set_device_memory(1, 4096) == cudaErrorInvalidDevice);
    cudaDeviceProp p;
    CU(cudaGetDeviceProperties(&p, 0));
    CHECK(!strcmp(p.name, "gpumemnet CUDA emulator") && p.totalGlobalMem == 4096);
    CHECK(p.major == 9 && p.minor == 0 && p.multiProcessorCount == 4 && p.warpSize == 32);
    int v;
    CU(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    CHECK(v == 4);
    CU(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
    CHECK(v == 9);
    CHECK(cudaGetDeviceProperties(&p, 1) == cudaErrorInvalidDevice);
    CU(cudaDriverGetVersion(&v));
    CHECK(v == CUDART_VERSION);
    CU(cudaRuntimeGetVersion(&v));
    CHECK(v == CUDART_VERSION);
    printf("OK\n");
}
"""


@pytest.fixture(scope="session")
def memory_exe(build):
    return build(MEMORY_PROGRAM)


def test_memory_capacity_accounting_and_checked_frees(memory_exe):
    run(memory_exe, "limits", env={"GPUMEMNET_EMU_MEMORY": "1M"})


@pytest.mark.parametrize("value,total", [("1048576", 1 << 20), ("64K", 64 << 10), ("2GiB", 2 << 30),
                                         ("3g", 3 << 30), ("", 8 << 30)])
def test_memory_size_from_environment(memory_exe, value, total):
    out = run(memory_exe, "total", env={"GPUMEMNET_EMU_MEMORY": value})
    assert f"total {total}\n" in out
    assert "poison 205\n" in out  # 0xCD


def test_poison_byte_from_environment(memory_exe):
    assert "poison 0\n" in run(memory_exe, "total", env={"GPUMEMNET_EMU_POISON": "0"})
    assert "poison 255\n" in run(memory_exe, "total", env={"GPUMEMNET_EMU_POISON": "0xff"})


@pytest.mark.parametrize("env", [{"GPUMEMNET_EMU_MEMORY": "banana"}, {"GPUMEMNET_EMU_MEMORY": "12Q"},
                                 {"GPUMEMNET_EMU_DEVICES": "-1"}, {"GPUMEMNET_EMU_DEVICES": "two"},
                                 {"GPUMEMNET_EMU_POISON": "256"}, {"GPUMEMNET_EMU_SCHEDULE": "sideways"},
                                 {"GPUMEMNET_EMU_SCHEDULE": "random:x"}, {"GPUMEMNET_EMU_CHECK_POINTERS": "yes"}])
def test_malformed_environment_is_an_initialization_error(memory_exe, env):
    run(memory_exe, "bad-env", env=env)


def test_no_device(memory_exe):
    run(memory_exe, "no-device", env={"GPUMEMNET_EMU_DEVICES": "0"})


def test_memcpy_and_memset_kinds_and_checks(build):
    exe = build(r"""
int main() {
    const int n = 64;
    float host[n], back[n];
    for (int i = 0; i < n; i++) host[i] = i * 0.5f;
    float *d1, *d2, *pinned;
    CU(cudaMalloc(&d1, sizeof host));
    CU(cudaMalloc(&d2, sizeof host));
    CU(cudaMallocHost(&pinned, sizeof host));
    CU(cudaMemcpy(d1, host, sizeof host, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(d2, d1, sizeof host, cudaMemcpyDeviceToDevice));
    CU(cudaMemcpy(pinned, d2, sizeof host, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(back, pinned, sizeof host, cudaMemcpyHostToHost));
    CHECK(!memcmp(back, host, sizeof host));
    /* cudaMemcpyDefault infers the direction */
    memset(back, 0, sizeof back);
    CU(cudaMemset(d1, 0, sizeof host));
    CU(cudaMemcpy(d1, host, sizeof host, cudaMemcpyDefault));
    CU(cudaMemcpy(d2, d1, sizeof host, cudaMemcpyDefault));
    CU(cudaMemcpy(back, d2, sizeof host, cudaMemcpyDefault));
    CHECK(!memcmp(back, host, sizeof host));
    /* part of a block, at an offset */
    CU(cudaMemcpy(d1 + 10, host, 5 * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(back, d1 + 8, 8 * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(back[0] == host[8] && back[2] == host[0] && back[6] == host[4] && back[7] == host[15]);
    CU(cudaMemset(d1 + 1, 0xff, 4));
    CU(cudaMemcpy(back, d1, 8, cudaMemcpyDeviceToHost));
    CHECK(back[0] == host[0] && back[1] != back[1]); /* 0xffffffff is a NaN */
    /* async on a stream: the same, finished on return */
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaMemsetAsync(d2, 0, sizeof host, s));
    CU(cudaMemcpyAsync(back, d2, sizeof host, cudaMemcpyDeviceToHost, s));
    CU(cudaStreamSynchronize(s));
    CHECK(back[5] == 0.0f);
    CU(cudaMemcpyAsync(d2, host, sizeof host, cudaMemcpyHostToDevice)); /* default stream */

    /* wrong directions, overruns, bad kinds: cudaErrorInvalidValue / InvalidMemcpyDirection, not sticky */
    CHECK(cudaMemcpy(back, host, sizeof host, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(strstr(gm_emu_last_message(), "is not device memory"));
    CHECK(cudaMemcpy(back, host, sizeof host, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(d1, d2, sizeof host, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(strstr(gm_emu_last_message(), "where host memory was expected"));
    CHECK(cudaMemcpy(d1, host, sizeof host, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(d1, host, sizeof host, cudaMemcpyHostToHost) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(d1 + 60, host, 8 * sizeof(float), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(strstr(gm_emu_last_message(), "16 bytes past the end"));
    CHECK(cudaMemcpy(back, d1 + 1, sizeof host, cudaMemcpyDefault) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(d1, host, 4, (cudaMemcpyKind)7) == cudaErrorInvalidMemcpyDirection);
    CHECK(cudaMemset(d1 + 1, 0, sizeof host) == cudaErrorInvalidValue);
    CHECK(cudaMemset(back, 0, 4) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(NULL, host, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CU(cudaGetLastError());
    CU(cudaMemcpy(NULL, NULL, 0, cudaMemcpyHostToDevice)); /* nothing to copy */
    CU(cudaStreamDestroy(s));
    CHECK(cudaMemcpyAsync(d1, host, 4, cudaMemcpyHostToDevice, s) == cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamDestroy(s) == cudaErrorInvalidResourceHandle);
    CU(cudaFree(d1));
    CHECK(cudaMemcpy(d1, host, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue); /* freed */
    CU(cudaFreeHost(pinned));
    printf("OK\n");
}
""")
    run(exe)


def test_streams_and_events(build):
    exe = build(r"""
#include <thread>
#include <chrono>
int main() {
    cudaStream_t s;
    cudaEvent_t a, b, notime;
    CU(cudaStreamCreate(&s));
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    CU(cudaEventCreateWithFlags(&notime, cudaEventDisableTiming));
    float ms = -1;
    CHECK(cudaEventElapsedTime(&ms, a, b) == cudaErrorInvalidResourceHandle); /* never recorded */
    CU(cudaEventRecord(a, s));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CU(cudaEventRecord(b, s));
    CU(cudaEventSynchronize(b));
    CU(cudaEventQuery(b));
    CU(cudaStreamWaitEvent(s, b, 0));
    CU(cudaEventElapsedTime(&ms, a, b));
    CHECK(ms >= 15.0f && ms < 5000.0f);
    CU(cudaEventRecord(notime));
    CHECK(cudaEventElapsedTime(&ms, a, notime) == cudaErrorInvalidResourceHandle);
    CU(cudaStreamSynchronize(s));
    CU(cudaStreamSynchronize(0));
    CU(cudaStreamSynchronize(cudaStreamPerThread));
    CU(cudaStreamQuery(s));
    CU(cudaDeviceSynchronize());
    CU(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(a) == cudaErrorInvalidResourceHandle);
    CHECK(cudaEventRecord(a, s) == cudaErrorInvalidResourceHandle);
    CU(cudaEventDestroy(b));
    CU(cudaEventDestroy(notime));
    CU(cudaStreamDestroy(s));
    CHECK(cudaStreamSynchronize(s) == cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamDestroy(0) == cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamCreateWithFlags(&s, 0x10) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CU(cudaGetLastError());
    CHECK(!strcmp(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation"));
    CHECK(!strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory"));
    CHECK(!strcmp(cudaGetErrorString(cudaErrorLaunchFailure), "unspecified launch failure"));
    CHECK(!strcmp(cudaGetErrorName((cudaError_t)12345), "cudaErrorUnknown"));
    printf("OK\n");
}
""")
    run(exe)


def test_symbol_copies_async_and_symbol_addresses(build):
    """cudaMemcpyToSymbol(Async)/FromSymbol(Async) with offsets and bounds, and cudaGetSymbolAddress, whose
    address copies and kernels accept as device memory."""
    exe = build(r"""
__device__ unsigned long long g_counter;
__device__ float g_table[8];
__global__ void bump(unsigned long long *p) { atomicAdd(p, 1ull); }
__global__ void scale(float *t) { t[threadIdx.x] *= 2.0f; }
int main() {
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    unsigned long long v = 40, out = 0;
    CU(cudaMemcpyToSymbolAsync(g_counter, &v, sizeof v, 0, cudaMemcpyHostToDevice, s));
    void *addr = NULL;
    CU(cudaGetSymbolAddress(&addr, g_counter));
    CHECK(addr == (void *)&g_counter);
    gm_emu_launch(bump, dim3(2), dim3(1), (unsigned long long *)addr);
    CU(cudaGetLastError());
    CU(cudaMemcpyFromSymbolAsync(&out, g_counter, sizeof out, 0, cudaMemcpyDeviceToHost, s));
    CU(cudaStreamSynchronize(s));
    CHECK(out == 42);
    float t[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8] = {0};
    CU(cudaMemcpyToSymbol(g_table, t, sizeof t));
    void *taddr;
    CU(cudaGetSymbolAddress(&taddr, g_table));
    gm_emu_launch(scale, dim3(1), dim3(8), (float *)taddr);
    CU(cudaGetLastError());
    /* the address works with the plain copies too, and its bounds are checked there */
    CU(cudaMemcpyAsync(back, taddr, sizeof back, cudaMemcpyDeviceToHost, s));
    CHECK(back[0] == 2.0f && back[7] == 16.0f);
    CHECK(cudaMemcpy(back, (char *)taddr + 4, sizeof back, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CU(cudaGetLastError());
    float two[2];
    CU(cudaMemcpyFromSymbolAsync(two, g_table, sizeof two, 6 * sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK(two[0] == 14.0f && two[1] == 16.0f);
    CHECK(cudaMemcpyFromSymbolAsync(two, g_table, sizeof two, 7 * sizeof(float), cudaMemcpyDeviceToHost, s) ==
          cudaErrorInvalidValue);
    CHECK(cudaMemcpyToSymbolAsync(g_counter, &v, sizeof v, 0, cudaMemcpyDeviceToHost, s) ==
          cudaErrorInvalidMemcpyDirection);
    CU(cudaStreamDestroy(s));
    CHECK(cudaMemcpyToSymbolAsync(g_counter, &v, sizeof v, 0, cudaMemcpyHostToDevice, s) ==
          cudaErrorInvalidResourceHandle);
    CHECK(cudaGetSymbolAddress(NULL, g_counter) == cudaErrorInvalidValue);
    printf("OK\n");
}
""")
    run(exe)


def test_held_streams_keep_events_pending_until_a_synchronize(build):
    """gm_emu_hold_streams: events recorded while held report cudaErrorNotReady (not an error: the last error
    stays clear) until their event, stream or device is synchronized, or the hold ends."""
    exe = build(r"""
int main() {
    cudaStream_t s;
    cudaEvent_t a, b, c;
    CU(cudaStreamCreate(&s));
    CU(cudaEventCreateWithFlags(&a, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&b, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&c, cudaEventDisableTiming));
    CU(cudaEventRecord(a, s));
    gm_emu_hold_streams(1);
    CU(cudaEventQuery(a));                      /* recorded before the hold: done */
    CU(cudaEventRecord(b, s));
    CU(cudaEventRecord(c, s));
    CHECK(cudaEventQuery(b) == cudaErrorNotReady);
    CU(cudaGetLastError());
    CU(cudaEventSynchronize(b));               /* waits for b only */
    CU(cudaEventQuery(b));
    CHECK(cudaEventQuery(c) == cudaErrorNotReady);
    CU(cudaStreamSynchronize(s));              /* the stream ran: c too */
    CU(cudaEventQuery(c));
    CU(cudaEventRecord(c, s));
    CHECK(cudaEventQuery(c) == cudaErrorNotReady);
    CU(cudaDeviceSynchronize());
    CU(cudaEventQuery(c));
    CU(cudaEventRecord(c, s));
    gm_emu_hold_streams(0);                    /* ending the hold lets everything run */
    CU(cudaEventQuery(c));
    printf("OK\n");
}
""")
    run(exe)


# ---- devices and threads -----------------------------------------------------------------------------------------
def test_current_device_is_per_thread_and_state_per_device(build):
    exe = build(r"""
#include <thread>
__global__ void diverge(int *p) { if (threadIdx.x) __syncthreads(); }
__global__ void reduce(const int *x, int *out) { /* 128-thread tree, one sum per block */
    __shared__ int s[128];
    s[threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x];
    __syncthreads();
    for (int w = 64; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
int main() {
    int n, dev = -1;
    CU(cudaGetDeviceCount(&n));
    CHECK(n == 2);
    CU(cudaGetDevice(&dev));
    CHECK(dev == 0);
    CU(cudaSetDevice(1));
    CHECK(cudaSetDevice(2) == cudaErrorInvalidDevice && cudaSetDevice(-1) == cudaErrorInvalidDevice);
    CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
    CU(cudaGetLastError());
    int other = -1, other_after = -1;
    std::thread t([&] {
        cudaGetDevice(&other); /* a new thread starts on device 0 */
        cudaSetDevice(0);
        cudaGetDevice(&other_after);
    });
    t.join();
    CHECK(other == 0 && other_after == 0);
    CU(cudaGetDevice(&dev));
    CHECK(dev == 1); /* untouched by the other thread */

    /* memory is accounted per device */
    void *p;
    size_t fr, total;
    CU(cudaMalloc(&p, 600000));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == (1 << 20) - 600000);
    CU(cudaSetDevice(0));
    CU(cudaMemGetInfo(&fr, &total));
    CHECK(fr == 1 << 20);
    CU(cudaFree(p)); /* freed from another current device: fine, as on a GPU */

    /* a crash is per device */
    int *q;
    CU(cudaSetDevice(1));
    CU(cudaMalloc(&q, 64));
    gm_emu_launch(diverge, dim3(1), dim3(4), q);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    (void)cudaGetLastError(); /* the last error is the thread's: take it before looking at the other device */
    CU(cudaSetDevice(0));
    CU(cudaDeviceSynchronize());
    CU(cudaMalloc(&p, 16));
    CU(cudaGetLastError());
    CU(cudaSetDevice(1));
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    gm_emu_reset();
    CU(cudaDeviceSynchronize());

    /* launches from several threads at once (the GIL released) are serialised and all correct */
    const int nthreads = 4, nb = 3;
    int failures[nthreads] = {0};
    std::vector<std::thread> ts;
    for (int k = 0; k < nthreads; k++)
        ts.emplace_back([k, &failures] {
            cudaSetDevice(k % 2);
            std::vector<int> hx(nb * 128), ho(nb);
            for (int i = 0; i < nb * 128; i++) hx[i] = (i + k) % 17;
            int *x, *o;
            if (cudaMalloc(&x, hx.size() * 4) || cudaMalloc(&o, nb * 4)) { failures[k] = 1000; return; }
            cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice);
            for (int rep = 0; rep < 50; rep++) {
                gm_emu_launch(reduce, dim3(nb), dim3(128), x, o);
                if (cudaGetLastError() != cudaSuccess) failures[k]++;
                cudaMemcpy(ho.data(), o, nb * 4, cudaMemcpyDeviceToHost);
                for (int b = 0; b < nb; b++) {
                    int want = 0;
                    for (int i = 0; i < 128; i++) want += hx[b * 128 + i];
                    if (ho[b] != want) failures[k]++;
                }
            }
        });
    for (auto &th : ts) th.join();
    for (int k = 0; k < nthreads; k++) CHECK(failures[k] == 0);
    printf("OK\n");
}
""")
    run(exe, env={"GPUMEMNET_EMU_DEVICES": "2", "GPUMEMNET_EMU_MEMORY": "1M"})


# ---- 16-bit floats -----------------------------------------------------------------------------------------------
def test_half_and_bfloat16_round_to_nearest_even_like_numpy(build, tmp_path):
    exe = build(r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
/* in: float32s; out: their half bits, their bf16 bits, then every half and every bf16 pattern as float32,
 * all converted inside a kernel, as philox.cu does */
__global__ void convert(const float *in, int n, uint16_t *h, uint16_t *b, float *hf, float *bf) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        h[i] = __half_as_ushort(__float2half_rn(in[i]));
        b[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 65536; i += gridDim.x * blockDim.x) {
        hf[i] = __half2float(__ushort_as_half((unsigned short)i));
        bf[i] = __bfloat162float(__ushort_as_bfloat16((unsigned short)i));
    }
}
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb");
    CHECK(f);
    std::vector<float> x(1 << 22);
    int n = (int)fread(x.data(), 4, x.size(), f);
    fclose(f);
    float *din, *dhf, *dbf;
    uint16_t *dh, *db;
    CU(cudaMalloc(&din, n * 4));
    CU(cudaMalloc(&dh, n * 2));
    CU(cudaMalloc(&db, n * 2));
    CU(cudaMalloc(&dhf, 65536 * 4));
    CU(cudaMalloc(&dbf, 65536 * 4));
    CU(cudaMemcpy(din, x.data(), n * 4, cudaMemcpyHostToDevice));
    gm_emu_launch(convert, dim3(4), dim3(256), din, n, dh, db, dhf, dbf);
    CU(cudaGetLastError());
    std::vector<uint16_t> h(n), b(n);
    std::vector<float> hf(65536), bf(65536);
    CU(cudaMemcpy(h.data(), dh, n * 2, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(b.data(), db, n * 2, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(hf.data(), dhf, 65536 * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(bf.data(), dbf, 65536 * 4, cudaMemcpyDeviceToHost));
    /* the same functions as the CPU kernels (kernels/common.h) */
    for (int i = 0; i < n; i++) CHECK(h[i] == gm_float_to_half(x[i]) && b[i] == gm_float_to_bf16(x[i]));
    f = fopen(argv[2], "wb");
    CHECK(f);
    fwrite(h.data(), 2, n, f);
    fwrite(b.data(), 2, n, f);
    fwrite(hf.data(), 4, 65536, f);
    fwrite(bf.data(), 4, 65536, f);
    fclose(f);
    printf("OK\n");
}
""")
    rng = np.random.default_rng(0)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 65519.99, 65520.0, 70000.0,
                        6.0e-8, 5.96e-8, 2.98e-8, 2.9802322e-8, 1e-10, 6.1035156e-05, 1.0009765625, 1.00048828125,
                        1.000732421875, 3.0e38, -3.4028235e38, 1.00390625, 1.005859375], dtype=np.float32)
    x = np.concatenate([
        special,
        rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32).view(np.float32),  # every kind of bits
        rng.uniform(-70000, 70000, 100000).astype(np.float32),
        rng.uniform(-1e-4, 1e-4, 100000).astype(np.float32),  # half subnormals
        # exact halfway cases between neighbouring halves: ties go to even
        ((np.arange(0, 30000, dtype=np.float32).astype(np.float16).astype(np.float32)
          + np.arange(1, 30001, dtype=np.float32).astype(np.float16).astype(np.float32)) / 2),
    ]).astype(np.float32)
    fin, fout = tmp_path / "in.bin", tmp_path / "out.bin"
    x.tofile(fin)
    run(exe, fin, fout)
    raw = fout.read_bytes()
    n = len(x)
    h = np.frombuffer(raw, np.uint16, n, 0)
    b = np.frombuffer(raw, np.uint16, n, 2 * n)
    hf = np.frombuffer(raw, np.float32, 65536, 4 * n)
    bf = np.frombuffer(raw, np.float32, 65536, 4 * n + 4 * 65536)

    nan = np.isnan(x)
    with np.errstate(over="ignore"):
        want_h = x.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(h[~nan], want_h[~nan])
    assert np.isnan(h.view(np.float16)[nan]).all()
    # bfloat16 = the top 16 bits of the float32, rounded to nearest even on the 16 bits dropped (sign-magnitude,
    # so the same rule on either sign; a carry out of the mantissa correctly reaches the exponent or infinity)
    bits = x[~nan].view(np.uint32)
    low, top = bits & 0xFFFF, bits >> 16
    round_up = (low > 0x8000) | ((low == 0x8000) & (top & 1 == 1))
    want_b = (top + round_up).astype(np.uint16)
    np.testing.assert_array_equal(b[~nan], want_b)
    assert (b[nan] & 0x7F80 == 0x7F80).all() and (b[nan] & 0x7F).all()

    every = np.arange(65536, dtype=np.uint16)
    want_hf = every.view(np.float16).astype(np.float32)
    ok = np.isnan(want_hf)
    np.testing.assert_array_equal(hf.view(np.uint32)[~ok], want_hf.view(np.uint32)[~ok])
    assert np.isnan(hf[ok]).all()
    np.testing.assert_array_equal(bf.view(np.uint32), every.astype(np.uint32) << 16)


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
