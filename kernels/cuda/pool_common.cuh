/* kernels/cuda/pool_common.cuh — what pool.cu and resize.cu share: element loads and stores through a double
 * (as kernels/cpu/pool.h's pool_ld / pool_st), the rounding of an in-place addition, 4-d strides by value, the
 * split of a thread's flat index into (n, c, y, x), and the launch of a kernel over every element of a tensor.
 *
 * Bit-identity with the CPU kernels rests on the same operations in the same order, and on no fused multiply-add
 * where the CPU rounds a product before adding (kernels/resize_taps.h's resize_mul, for resize.cu). */
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

/* Flat index i of an (N, C, Y, X) tensor as (n, c, y, x), divided in I (uint32_t when gm_pl_fits32). */
template <typename I> struct gm_pl_nchw {
    I n, c, y, x;
};

template <typename I>
__host__ __device__ __forceinline__ gm_pl_nchw<I> gm_pl_split(int64_t i, int64_t C, int64_t Y, int64_t X) {
    const I ii = (I)i, x = ii % (I)X, r = ii / (I)X, y = r % (I)Y, nc = r / (I)Y, n = nc / (I)C;
    return gm_pl_nchw<I>{n, nc - n * (I)C, y, x};
}

/* Launch KERNEL<DT, I>(args..., total) over `total` threads (none when total <= 0), I = uint32_t when every
 * index fits 32 bits, int64_t otherwise. */
#define GM_PL_LAUNCH(KERNEL, DT, total, ctx, ...)                                                            \
    do {                                                                                                     \
        const int64_t total_ = (total);                                                                      \
        if (total_ <= 0) break;                                                                              \
        const unsigned nb_ = gm_cu_blocks(total_, ctx);                                                      \
        if (gm_pl_fits32(total_)) {                                                                          \
            auto *k_ = &KERNEL<DT, uint32_t>;                                                                \
            GM_LAUNCH(k_, nb_, GM_CU_THREADS, ctx, __VA_ARGS__, total_);                                     \
        } else {                                                                                             \
            auto *k_ = &KERNEL<DT, int64_t>;                                                                 \
            GM_LAUNCH(k_, nb_, GM_CU_THREADS, ctx, __VA_ARGS__, total_);                                     \
        }                                                                                                    \
    } while (0)

/* The end of an entry point, after its checks: GM_PL_LAUNCH for the float dtype dt, then return GM_OK from the
 * calling function, or GM_ERR_BACKEND if the launch failed, or GM_ERR_ARG if dt is not a float dtype (as
 * GM_CU_SWITCH_FLOAT, which cannot pass the kernel's arguments through). */
#define GM_PL_LAUNCH_AND_RETURN(KERNEL, dt, total, ctx, ...)                                                 \
    do {                                                                                                     \
        switch (dt) {                                                                                        \
        case GM_F32: GM_PL_LAUNCH(KERNEL, GM_F32, total, ctx, __VA_ARGS__); break;                           \
        case GM_F64: GM_PL_LAUNCH(KERNEL, GM_F64, total, ctx, __VA_ARGS__); break;                           \
        case GM_F16: GM_PL_LAUNCH(KERNEL, GM_F16, total, ctx, __VA_ARGS__); break;                           \
        case GM_BF16: GM_PL_LAUNCH(KERNEL, GM_BF16, total, ctx, __VA_ARGS__); break;                         \
        default: return GM_ERR_ARG;                                                                          \
        }                                                                                                    \
        GM_CU_LAUNCHED(ctx);                                                                                 \
        return GM_OK;                                                                                        \
    } while (0)

#endif
