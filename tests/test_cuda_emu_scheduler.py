"""The CUDA emulator's scheduler (kernels/cuda/emu/emu_launch.cpp): small .cu programs are compiled by g++ against
its headers, exactly as setup.py compiles kernels/cuda/*.cu in a GPUMEMNET_CUDA=emu build, linked with its runtime
and run.

What is checked: grid-stride coverage, built-in variables in 1-3 d, __syncthreads in shared-memory reductions (in
three block/thread orders), divergent barriers reported as a sticky launch failure that gm_emu_reset clears, bad
launch configurations, traps, kernel arguments (per-thread copies, device pointers only), writes outside a block,
and the portable context switch. Needs only a C++17 compiler; no GPU, no gpumemnet build."""
import glob
import os
import subprocess

import pytest

from emu_util import CXX, EMU, PRELUDE, SCHEDULES, compile_cmd, compile_one, requires_cxx, run

pytestmark = requires_cxx


# ---- the scheduler -----------------------------------------------------------------------------------------------
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
