/* kernels/cuda/pool_common.cuh — what pool.cu and resize.cu share: element loads and stores through a double
 * (as kernels/cpu/pool.h's pool_ld / pool_st), the rounding of an in-place addition, 4-d strides by value, and
 * exact arithmetic helpers.
 *
 * Bit-identity with the CPU kernels rests on the same operations in the same order, and on no fused multiply-add
 * where the CPU rounds a product before adding (kernels/cpu/resize_taps.h's resize_mul, for resize.cu). */
#ifndef GM_KERNELS_CUDA_POOL_COMMON_CUH
#define GM_KERNELS_CUDA_POOL_COMMON_CUH

#include "cuda_common.cuh"

/* Element strides of an (N, C, H, W) operand, passed to kernels by value. */
struct gm_pl_st4 {
    int64_t s[4];
};

static inline gm_pl_st4 gm_pl_st4_of(const int64_t st[4]) {
    gm_pl_st4 r;
    for (int i = 0; i < 4; i++) r.s[i] = st[i];
    return r;
}

/* Element i of a dtype-DT tensor as a double / a double stored (float16/bfloat16 through float, as the CPU). */
template <int DT> __host__ __device__ __forceinline__ double gm_pl_ld(const void *p, int64_t i) {
    typedef typename gm_cu_type<DT>::st S;
    return (double)gm_cu_ld<DT>((const S *)p + i);
}

template <int DT> __host__ __device__ __forceinline__ void gm_pl_st(void *p, int64_t i, double v) {
    typedef typename gm_cu_type<DT>::st S;
    gm_cu_st<DT>((S *)p + i, (typename gm_cu_type<DT>::acc)v);
}

/* v rounded to DT and widened back: what the CPU's `plane[i] += v` (load, add in double, store) leaves. */
template <int DT> __host__ __device__ __forceinline__ double gm_pl_round(double v) {
    if (DT == GM_F64) return v;
    if (DT == GM_F32) return (double)(float)v;
    if (DT == GM_F16) return (double)gm_half_to_float(gm_float_to_half((float)v));
    return (double)gm_bf16_to_float(gm_float_to_bf16((float)v));
}

__host__ __device__ __forceinline__ int64_t gm_pl_floor_div(int64_t a, int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* Whether every index of a kernel over `total` elements and its sizes fits 32 bits: then the per-element
 * decomposition of the flat index uses 32-bit divisions, several times cheaper than 64-bit ones on the GPU. */
static inline int gm_pl_fits32(int64_t total) { return total < ((int64_t)1 << 31); }

#endif
