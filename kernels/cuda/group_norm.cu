/* kernels/cuda/group_norm.cu — group normalization on CUDA (see kernels/cpu/group_norm.h for the contract and
 * kernels/cpu/group_norm.c for the reference; layer norm and instance norm run through it too).
 *
 * One block per (n, g) group for the forward and the input gradient: the group's D*HW elements are contiguous,
 * so the block's threads read them coalesced, reduce in double (the variance in two passes, as the CPU) and
 * then write the group. The weight and bias gradients sum over n, one block per channel. Every sum is one
 * block's fixed-order reduction: results are deterministic, and no scratch is needed. Limit, noted for later: a
 * model with very few, very large groups (a small batch of large images with GroupNorm(1, C)) keeps few
 * blocks busy; splitting a group over blocks would take batch norm's partial-sum workspace (norm.cu). */
#include "group_norm.h"
#include "nn_common.cuh"

/* Channel of element i (0 <= i < D*HW) of a group whose first channel is c0. */
__device__ __forceinline__ int64_t gn_channel(int64_t c0, int64_t i, int64_t HW) {
    return c0 + (HW == 1 ? i : i / HW);
}

template <int DT>
__global__ void gn_forward_kernel(void *out, void *mean, void *rstd, const void *inp, const void *weight,
                                  const void *bias, int64_t R, int64_t G, int64_t D, int64_t HW, int wdt, int sdt,
                                  double eps) {
    const int64_t M = D * HW;
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
        const int64_t base = r * M, c0 = (r % G) * D;
        double s = 0.0, ss = 0.0;
        for (int64_t i = threadIdx.x; i < M; i += GM_CU_THREADS) s += nn_ld<DT>(inp, base + i);
        s = gm_cu_block_reduce(s, gm_cu_sum());
        const double mu = M ? s / (double)M : 0.0;
        for (int64_t i = threadIdx.x; i < M; i += GM_CU_THREADS) {
            const double d = nn_ld<DT>(inp, base + i) - mu;
            ss += d * d;
        }
        ss = gm_cu_block_reduce(ss, gm_cu_sum());
        const double is = 1.0 / sqrt((M ? ss / (double)M : 0.0) + eps);
        if (threadIdx.x == 0) {
            nn_st_rt(mean, r, sdt, mu);
            nn_st_rt(rstd, r, sdt, is);
        }
        for (int64_t i = threadIdx.x; i < M; i += GM_CU_THREADS) {
            const int64_t c = gn_channel(c0, i, HW);
            /* out = x * a + b' with a = w * rstd, b' = bias - mean * a, computed as the CPU does */
            const double a = (weight ? nn_ld_rt(weight, c, wdt) : 1.0) * is;
            const double b = (bias ? nn_ld_rt(bias, c, wdt) : 0.0) - mu * a;
            nn_st<DT>(out, base + i, nn_ld<DT>(inp, base + i) * a + b);
        }
    }
}

/* dweight_c = sum(dout * (x - mean) * rstd), dbias_c = sum(dout) over the N*HW elements of channel c. */
template <int DT>
__global__ void gn_dweight_kernel(void *dweight, void *dbias, const void *dout, const void *inp, const void *mean,
                                  const void *rstd, int64_t N, int64_t C, int64_t HW, int64_t G, int wdt, int sdt) {
    const int64_t D = C / G;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        double gw = 0.0, gb = 0.0;
        for (int64_t k = threadIdx.x; k < N * HW; k += GM_CU_THREADS) {
            const int64_t n = HW == 1 ? k : k / HW, j = k - n * HW;
            const int64_t r = n * G + c / D, i = (n * C + c) * HW + j;
            const double g = nn_ld<DT>(dout, i);
            gb += g;
            gw += g * (nn_ld<DT>(inp, i) - nn_ld_rt(mean, r, sdt)) * nn_ld_rt(rstd, r, sdt);
        }
        gw = gm_cu_block_reduce(gw, gm_cu_sum());
        gb = gm_cu_block_reduce(gb, gm_cu_sum());
        if (threadIdx.x == 0) {
            if (dweight) nn_st_rt(dweight, c, wdt, gw);
            if (dbias) nn_st_rt(dbias, c, wdt, gb);
        }
    }
}

template <int DT>
__global__ void gn_dinput_kernel(void *dinp, const void *dout, const void *inp, const void *weight, const void *mean,
                                 const void *rstd, int64_t R, int64_t G, int64_t D, int64_t HW, int wdt, int sdt) {
    const int64_t M = D * HW;
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
        const int64_t base = r * M, c0 = (r % G) * D;
        const double mu = nn_ld_rt(mean, r, sdt), is = nn_ld_rt(rstd, r, sdt);
        double s1 = 0.0, s2 = 0.0; /* sum(wg), sum(wg * (x - mean)) */
        for (int64_t i = threadIdx.x; i < M; i += GM_CU_THREADS) {
            const double w = weight ? nn_ld_rt(weight, gn_channel(c0, i, HW), wdt) : 1.0;
            const double wg = w * nn_ld<DT>(dout, base + i);
            s1 += wg;
            s2 += wg * (nn_ld<DT>(inp, base + i) - mu);
        }
        s1 = gm_cu_block_reduce(s1, gm_cu_sum());
        s2 = gm_cu_block_reduce(s2, gm_cu_sum());
        const double m1 = M ? s1 / (double)M : 0.0, proj = M ? s2 * is * is / (double)M : 0.0;
        /* every thread rewrites only elements it read above: dinp may be dout itself */
        for (int64_t i = threadIdx.x; i < M; i += GM_CU_THREADS) {
            const double w = weight ? nn_ld_rt(weight, gn_channel(c0, i, HW), wdt) : 1.0;
            const double x = nn_ld<DT>(inp, base + i);
            nn_st<DT>(dinp, base + i, is * (w * nn_ld<DT>(dout, base + i) - m1 - (x - mu) * proj));
        }
    }
}

static unsigned gn_grid(int64_t n) { return (unsigned)gm_cu_max<int64_t>(1, gm_cu_min<int64_t>(n, GM_CU_MAX_BLOCKS)); }

extern "C" int cuda_groupnorm_forward(void *out, void *mean, void *rstd, const void *inp, const void *weight,
                                      const void *bias, int64_t N, int64_t C, int64_t HW, int64_t G, gm_dtype dt,
                                      gm_dtype wdt, gm_dtype sdt, double eps, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0 || G < 1 || C % G) return GM_ERR_ARG;
    const int64_t R = N * G;
    if (R == 0) return GM_OK;
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &gn_forward_kernel<DT>;                                                                    \
        GM_LAUNCH(k, gn_grid(R), GM_CU_THREADS, ctx, out, mean, rstd, inp, weight, bias, R, G, C / G, HW,    \
                  (int)wdt, (int)sdt, eps);                                                                  \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_groupnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                                       const void *weight, const void *mean, const void *rstd, int64_t N, int64_t C,
                                       int64_t HW, int64_t G, gm_dtype dt, gm_dtype wdt, gm_dtype sdt,
                                       gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0 || G < 1 || C % G || !inp) return GM_ERR_ARG;
    if (N * C == 0) return GM_OK;
    /* the weight/bias sums first, on the same stream: dinp may be written over dout */
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        if (dweight || dbias) {                                                                              \
            auto *k1 = &gn_dweight_kernel<DT>;                                                               \
            GM_LAUNCH(k1, gn_grid(C), GM_CU_THREADS, ctx, dweight, dbias, dout, inp, mean, rstd, N, C, HW, G, \
                      (int)wdt, (int)sdt);                                                                   \
        }                                                                                                    \
        if (dinp) {                                                                                          \
            auto *k2 = &gn_dinput_kernel<DT>;                                                                \
            GM_LAUNCH(k2, gn_grid(N * G), GM_CU_THREADS, ctx, dinp, dout, inp, weight, mean, rstd, N * G, G,  \
                      C / G, HW, (int)wdt, (int)sdt);                                                        \
        }                                                                                                    \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
