/* kernels/cuda/cuda_common.cuh — what every .cu file of kernels/cuda/ shares: launching, error checks, grid sizing,
 * dtype loads/stores, strided N-d indexing and a block reduction.
 *
 * Every .cu file here is compiled two ways (kernels/cuda/README.md):
 *  - by nvcc for the GPU (a CUDA build);
 *  - by g++ as C++ against kernels/cuda/emu/ (GPUMEMNET_CUDA=emu), which runs kernels on the CPU with one fiber
 *    per CUDA thread, so kernel logic is tested on machines without a GPU (CI).
 * Hence the rules: launch only through GM_LAUNCH; synchronise only with __syncthreads() (no warp shuffles, no
 * warp-synchronous code, no cooperative groups); fixed-size __shared__ arrays only (no `extern __shared__`);
 * convert 16-bit floats with common.h's gm_half_to_float & co. (bit-identical to the CPU kernels); no bare
 * min/max (use gm_cu_min/gm_cu_max). Files that call cuDNN or cuBLAS are the exception: the emulator build
 * replaces them (the _emu.cpp files in kernels/cuda/emu/). */
#ifndef GM_KERNELS_CUDA_COMMON_CUH
#define GM_KERNELS_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "../common.h"
#include "cuda_ctx.h"

/* Threads per block for every 1-d kernel; the block reduction below assumes this many. */
#define GM_CU_THREADS 256

#ifdef GM_CUDA_EMU
/* The emulator runs blocks one after another: few blocks keep tests fast and exercise the grid-stride loops. */
#define GM_CU_MAX_BLOCKS 4
#define GM_LAUNCH(kernel, grid, block, ctx, ...) \
    (gm_emu_log_launch((ctx)->stream), gm_emu_launch((kernel), dim3(grid), dim3(block), ##__VA_ARGS__))
#else
#define GM_CU_MAX_BLOCKS 65535
/* A template kernel with commas in its arguments: bind it first, `auto *k = &my_kernel<A, B>;` */
#define GM_LAUNCH(kernel, grid, block, ctx, ...) \
    (kernel)<<<(grid), (block), 0, (cudaStream_t)(ctx)->stream>>>(__VA_ARGS__)
/* (a kernel without arguments: GM_LAUNCH(k, grid, block, ctx) works in both builds) */
#endif

/* Record "what failed at file:line: reason" in ctx->err and return GM_ERR_BACKEND from the calling function. */
#define GM_CU_CHECK(ctx, call)                                                                               \
    do {                                                                                                     \
        cudaError_t gm_e_ = (call);                                                                          \
        if (gm_e_ != cudaSuccess) {                                                                          \
            (void)cudaGetLastError();                                                                        \
            snprintf((ctx)->err, sizeof (ctx)->err, "%s failed at %s:%d: %s (%s)", #call, __FILE__, __LINE__, \
                     cudaGetErrorName(gm_e_), cudaGetErrorString(gm_e_));                                    \
            return GM_ERR_BACKEND;                                                                           \
        }                                                                                                    \
    } while (0)

/* After launches: a bad configuration (or a sticky error of an earlier kernel) shows up here. */
#define GM_CU_LAUNCHED(ctx) GM_CU_CHECK(ctx, cudaGetLastError())

template <typename T> __host__ __device__ __forceinline__ T gm_cu_min(T a, T b) { return b < a ? b : a; }
template <typename T> __host__ __device__ __forceinline__ T gm_cu_max(T a, T b) { return a < b ? b : a; }

/* Blocks for a grid-stride loop over n items: enough to fill the device several times, never 0. */
static inline unsigned gm_cu_blocks(int64_t n, const gm_cuda_ctx *ctx) {
    int64_t want = (n + GM_CU_THREADS - 1) / GM_CU_THREADS;
    int64_t cap = ctx->sm_count > 0 ? (int64_t)ctx->sm_count * 8 : 1024;
    if (cap > GM_CU_MAX_BLOCKS) cap = GM_CU_MAX_BLOCKS;
    if (want > cap) want = cap;
    return want < 1 ? 1u : (unsigned)want;
}

#define GM_CU_GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- dtypes: storage type, compute type, load/store ------------------------------------------------------
 * Compute types match the CPU kernels: float for float32/float16/bfloat16, double for float64, int64 for int64
 * and bool. Stores round to nearest even (16-bit) and store bools as v != 0. */
template <int DT> struct gm_cu_type;
template <> struct gm_cu_type<GM_F32> { typedef float st; typedef float acc; };
template <> struct gm_cu_type<GM_F64> { typedef double st; typedef double acc; };
template <> struct gm_cu_type<GM_F16> { typedef uint16_t st; typedef float acc; };
template <> struct gm_cu_type<GM_BF16> { typedef uint16_t st; typedef float acc; };
template <> struct gm_cu_type<GM_I64> { typedef int64_t st; typedef int64_t acc; };
template <> struct gm_cu_type<GM_BOOL> { typedef uint8_t st; typedef int64_t acc; };

template <int DT> __host__ __device__ __forceinline__ typename gm_cu_type<DT>::acc gm_cu_ld(const void *p) {
    typedef typename gm_cu_type<DT>::st S;
    S v = *(const S *)p;
    if (DT == GM_F16) return (typename gm_cu_type<DT>::acc)gm_half_to_float((uint16_t)v);
    if (DT == GM_BF16) return (typename gm_cu_type<DT>::acc)gm_bf16_to_float((uint16_t)v);
    return (typename gm_cu_type<DT>::acc)v;
}

template <int DT> __host__ __device__ __forceinline__ void gm_cu_st(void *p, typename gm_cu_type<DT>::acc v) {
    typedef typename gm_cu_type<DT>::st S;
    if (DT == GM_F16) *(uint16_t *)p = gm_float_to_half((float)v);
    else if (DT == GM_BF16) *(uint16_t *)p = gm_float_to_bf16((float)v);
    else if (DT == GM_BOOL) *(uint8_t *)p = (uint8_t)(v != 0);
    else *(S *)p = (S)v;
}

/* Any dtype loaded as double / a double stored as any dtype (casts; mirrors common.h's gm_load_f64). */
__host__ __device__ __forceinline__ double gm_cu_ld_f64(const void *p, int dt) {
    switch (dt) {
    case GM_F32: return gm_cu_ld<GM_F32>(p);
    case GM_F64: return gm_cu_ld<GM_F64>(p);
    case GM_F16: return gm_cu_ld<GM_F16>(p);
    case GM_BF16: return gm_cu_ld<GM_BF16>(p);
    case GM_I64: return (double)gm_cu_ld<GM_I64>(p);
    default: return *(const uint8_t *)p ? 1.0 : 0.0;
    }
}

/* Instantiate CALL(DT) for the runtime dtype `dt` (float dtypes only / every dtype); others: GM_ERR_ARG. */
#define GM_CU_CASES_FLOAT(CALL)                                                                              \
    case GM_F32: CALL(GM_F32); break;                                                                        \
    case GM_F64: CALL(GM_F64); break;                                                                        \
    case GM_F16: CALL(GM_F16); break;                                                                        \
    case GM_BF16: CALL(GM_BF16); break;
#define GM_CU_SWITCH_FLOAT(dt, CALL)                                                                         \
    switch (dt) {                                                                                            \
    GM_CU_CASES_FLOAT(CALL)                                                                                  \
    default: return GM_ERR_ARG;                                                                              \
    }
#define GM_CU_SWITCH_ALL(dt, CALL)                                                                           \
    switch (dt) {                                                                                            \
    GM_CU_CASES_FLOAT(CALL)                                                                                  \
    case GM_I64: CALL(GM_I64); break;                                                                        \
    case GM_BOOL: CALL(GM_BOOL); break;                                                                      \
    default: return GM_ERR_ARG;                                                                              \
    }

/* ---- strided N-d operands --------------------------------------------------------------------------------
 * N operands over one shape, strides in BYTES (0 on broadcast dims), passed to kernels by value. Built on the
 * host by gm_cu_geom_make, which drops size-1 dims and merges dims that are contiguous for every operand, so
 * the common cases reach the kernel as ndim 1. */
template <int N> struct gm_cu_geom {
    int ndim;
    int64_t numel;
    int64_t shape[GM_MAX_DIMS];
    int64_t st[N][GM_MAX_DIMS];
};

template <int N>
static inline gm_cu_geom<N> gm_cu_geom_make(int ndim, const int64_t *shape, const int64_t *const strides[N]) {
    gm_cu_geom<N> g;
    g.ndim = 0;
    g.numel = 1;
    for (int d = 0; d < ndim; d++) g.numel *= shape[d];
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        int k = g.ndim;
        if (k > 0) { /* merge with the previous kept dim when row-major contiguous for all operands */
            int merge = 1;
            for (int j = 0; j < N; j++)
                if (g.st[j][k - 1] != strides[j][d] * shape[d]) merge = 0;
            if (merge) {
                g.shape[k - 1] *= shape[d];
                for (int j = 0; j < N; j++) g.st[j][k - 1] = strides[j][d];
                continue;
            }
        }
        g.shape[k] = shape[d];
        for (int j = 0; j < N; j++) g.st[j][k] = strides[j][d];
        g.ndim++;
    }
    return g;
}

/* Byte offsets of linear (row-major) element i in each operand. */
template <int N>
__host__ __device__ __forceinline__ void gm_cu_offsets(const gm_cu_geom<N> &g, int64_t i, int64_t off[N]) {
    for (int j = 0; j < N; j++) off[j] = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        int64_t s = g.shape[d];
        int64_t q = i / s, r = i - q * s;
        for (int j = 0; j < N; j++) off[j] += r * g.st[j][d];
        i = q;
    }
}

/* ---- block reduction ---------------------------------------------------------------------------------------
 * Every thread of a block of GM_CU_THREADS threads calls it with its partial value; every thread gets the
 * reduction of all of them. Shared memory + __syncthreads only (see the rules above). */
template <typename T, typename Op> __device__ __forceinline__ T gm_cu_block_reduce(T v, Op op) {
    __shared__ T buf[GM_CU_THREADS];
    const int t = threadIdx.x;
    buf[t] = v;
    __syncthreads();
    for (int s = GM_CU_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] = op(buf[t], buf[t + s]);
        __syncthreads();
    }
    T r = buf[0];
    __syncthreads(); /* buf may be reused by the next call */
    return r;
}

struct gm_cu_sum {
    template <typename T> __host__ __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

#endif
