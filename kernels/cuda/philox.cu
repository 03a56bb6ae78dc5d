/* kernels/cuda/philox.cu — CUDA fills of the Philox stream (uniform and normal, every float dtype).
 * The stream and the per-element math are defined once in kernels/philox.h (compiled here as
 * __host__ __device__), so this file is the CPU loop of kernels/cpu/philox.c turned into one thread per block;
 * the CPU fill is the reference the tests compare this one with. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_common.cuh"

#include "../philox.h"

#define PHILOX_CUDA_CHECK(call, err, errlen)                                                           \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            if (err && errlen) snprintf(err, errlen, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__, \
                                        cudaGetErrorString(e_));                                       \
            return GM_ERR_BACKEND;                                                                     \
        }                                                                                              \
    } while (0)

/* Stores mirror kernels/cpu/philox.c: double -> dtype with round-to-nearest-even (through float for the 16-bit
 * types), and for uniform the largest dtype value below `high` when rounding reached it. */
__device__ __forceinline__ void store_f32(float *out, int64_t i, double v, int clamp, double high) {
    float f = __double2float_rn(v);
    if (clamp && (double)f >= high) {
        f = __double2float_rn(high);
        if ((double)f >= high) f = nextafterf(f, -INFINITY);
    }
    out[i] = f;
}
__device__ __forceinline__ void store_f64(double *out, int64_t i, double v, int clamp, double high) {
    if (clamp && v >= high) v = nextafter(high, -HUGE_VAL);
    out[i] = v;
}
__device__ __forceinline__ uint16_t to_h16(float f, int bf16) {
    return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(f)) : __half_as_ushort(__float2half_rn(f));
}
__device__ __forceinline__ float from_h16(uint16_t h, int bf16) {
    return bf16 ? __bfloat162float(__ushort_as_bfloat16(h)) : __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ void store_h16(uint16_t *out, int64_t i, double v, int clamp, double high, int bf16) {
    uint16_t h = to_h16(__double2float_rn(v), bf16);
    if (clamp && (double)from_h16(h, bf16) >= high) {
        h = to_h16(__double2float_rn(high), bf16);
        if ((double)from_h16(h, bf16) >= high) h = philox_h16_step_down(h);
    }
    out[i] = h;
}

/* One thread per stream block (grid-stride), each writing its 2 or 4 elements. */
template <int DT, int DIST>
__global__ void philox_fill_kernel(void *out, int64_t n, int64_t nblocks, uint64_t seed, uint64_t offset, double a,
                                   double scale, int clamp, double high) {
    const gm_dtype dt = (gm_dtype)DT;
    const int per = philox_per_block(dt), bits = philox_uniform_bits(dt);
    const double inv = 1.0 / (double)(1u << bits); /* exact: a power of two */
    for (int64_t blk = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; blk < nblocks;
         blk += (int64_t)gridDim.x * blockDim.x) {
        uint32_t x[4];
        philox_stream_block(seed, offset + (uint64_t)blk, x);
        int64_t i0 = blk * per;
        int cnt = (int)(n - i0 < per ? n - i0 : per);
        for (int j = 0; j < cnt; j++) {
            double v;
            if (DT == GM_F64)
                v = DIST == GM_RNG_UNIFORM ? philox_f64_uniform(x, j) : philox_f64_normal(x, j);
            else
                v = DIST == GM_RNG_UNIFORM ? philox_narrow_uniform(x, j, bits, inv) : philox_narrow_normal(x, j);
            v = philox_affine(a, scale, v);
            if (DT == GM_F32) store_f32((float *)out, i0 + j, v, clamp, high);
            else if (DT == GM_F64) store_f64((double *)out, i0 + j, v, clamp, high);
            else store_h16((uint16_t *)out, i0 + j, v, clamp, high, DT == GM_BF16);
        }
    }
}

template <int DT>
static void launch_dt(int dist, void *out, int64_t n, int64_t nblocks, uint64_t seed, uint64_t offset, double a,
                      double scale, int clamp, double high, unsigned grid, unsigned threads, cudaStream_t s) {
    const gm_cuda_ctx ctx = {0, (void *)s, NULL, NULL, 0, 0, {0}}; /* GM_LAUNCH reads the stream from it */
    auto *k = dist == GM_RNG_UNIFORM ? &philox_fill_kernel<DT, GM_RNG_UNIFORM> : &philox_fill_kernel<DT, GM_RNG_NORMAL>;
    GM_LAUNCH(k, grid, threads, &ctx, out, n, nblocks, seed, offset, a, scale, clamp, high);
}

extern "C" int gm_philox_fill_cuda(void *out, gm_dtype dt, int dist, int64_t n, uint64_t seed, uint64_t offset,
                                   double a, double b, int device, void *stream, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!gm_dtype_is_float(dt) || (dist != GM_RNG_UNIFORM && dist != GM_RNG_NORMAL)) return GM_ERR_ARG;
    if (n <= 0) return GM_OK;
    /* launch on `device` and restore the caller's current device afterwards, as csrc/cuda.c does */
    int prev = 0;
    PHILOX_CUDA_CHECK(cudaGetDevice(&prev), err, errlen);
    PHILOX_CUDA_CHECK(cudaSetDevice(device), err, errlen);
    const int64_t nblocks = (int64_t)philox_blocks(dt, n);
    const double scale = dist == GM_RNG_UNIFORM ? b - a : b;
    const int clamp = dist == GM_RNG_UNIFORM && b > a && !(a == 0.0 && b == 1.0); /* as philox.c */
    const unsigned threads = 256;
    /* Enough blocks to fill the GPU several times over; the grid-stride loop covers the rest. */
    int64_t want = (nblocks + threads - 1) / threads;
    unsigned grid = (unsigned)(want < GM_CU_MAX_BLOCKS ? want : GM_CU_MAX_BLOCKS);
    cudaStream_t s = (cudaStream_t)stream;
    switch (dt) {
    case GM_F32: launch_dt<GM_F32>(dist, out, n, nblocks, seed, offset, a, scale, clamp, b, grid, threads, s); break;
    case GM_F64: launch_dt<GM_F64>(dist, out, n, nblocks, seed, offset, a, scale, clamp, b, grid, threads, s); break;
    case GM_F16: launch_dt<GM_F16>(dist, out, n, nblocks, seed, offset, a, scale, clamp, b, grid, threads, s); break;
    default: launch_dt<GM_BF16>(dist, out, n, nblocks, seed, offset, a, scale, clamp, b, grid, threads, s); break;
    }
    cudaError_t launched = cudaGetLastError();
    PHILOX_CUDA_CHECK(cudaSetDevice(prev), err, errlen);
    PHILOX_CUDA_CHECK(launched, err, errlen);
    return GM_OK;
}
