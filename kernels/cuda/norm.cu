/* kernels/cuda/norm.cu — batch normalization on CUDA (see kernels/cpu/norm.h for the contract and
 * kernels/cpu/norm.c for the reference).
 *
 * Statistics and gradients: one block per channel (grid-stride over channels), so a channel's sums are block
 * reductions in double (gm_cu_block_reduce), deterministic, and the block applies the result with the
 * unrounded double mean/invstd as the CPU does (the saved mean/invstd are rounded to sdt; normalising with
 * the rounded values would shift outputs of data far from 0). Nothing is allocated: no cross-block partials.
 * Eval forward is elementwise: blocks walk (n, c) rows, computing the row's scale and shift once.
 * Per-channel values (weight, running statistics, saved statistics) are read through their runtime dtypes. */
#include "norm.h"
#include "nn_common.cuh"

/* Run the statements for each element index I of channel c of a contiguous (N, C, HW) array, spread over the
 * block's threads. Long rows walk HW inside each of the N runs (no division); short rows (2-d input: HW = 1,
 * late feature maps: 7x7) walk the channel's N*HW elements flat, so that every thread has work. */
#define CHANNEL_FOR(I, ...)                                                                                  \
    if (HW >= GM_CU_THREADS) {                                                                               \
        for (int64_t n_ = 0; n_ < N; n_++) {                                                                 \
            const int64_t b_ = (n_ * C + c) * HW;                                                            \
            for (int64_t j_ = threadIdx.x; j_ < HW; j_ += GM_CU_THREADS) {                                   \
                const int64_t I = b_ + j_;                                                                   \
                __VA_ARGS__;                                                                                 \
            }                                                                                                \
        }                                                                                                    \
    } else {                                                                                                 \
        for (int64_t k_ = threadIdx.x; k_ < N * HW; k_ += GM_CU_THREADS) {                                   \
            const int64_t n_ = HW == 1 ? k_ : k_ / HW;                                                       \
            const int64_t I = (n_ * C + c) * HW + (k_ - n_ * HW);                                            \
            __VA_ARGS__;                                                                                     \
        }                                                                                                    \
    }

template <int DT>
__global__ void bn_train_kernel(void *out, void *mean, void *invstd, void *running_mean, void *running_var,
                                const void *inp, const void *weight, const void *bias, int64_t N, int64_t C,
                                int64_t HW, int wdt, int rdt, int sdt, double momentum, double eps) {
    const int64_t cnt = N * HW;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        double s = 0.0;
        CHANNEL_FOR(i, s += nn_ld<DT>(inp, i))
        const double mu = gm_cu_block_reduce(s, gm_cu_sum()) / (double)cnt;
        double ss = 0.0; /* two passes: no cancellation for data far from 0 */
        CHANNEL_FOR(i, const double d = nn_ld<DT>(inp, i) - mu; ss += d * d)
        ss = gm_cu_block_reduce(ss, gm_cu_sum());
        const double is = 1.0 / sqrt(ss / (double)cnt + eps);
        if (threadIdx.x == 0) {
            if (running_mean)
                nn_st_rt(running_mean, c, rdt, (1.0 - momentum) * nn_ld_rt(running_mean, c, rdt) + momentum * mu);
            if (running_var && cnt > 1) {
                const double unbiased = ss / (double)(cnt - 1);
                nn_st_rt(running_var, c, rdt, (1.0 - momentum) * nn_ld_rt(running_var, c, rdt) + momentum * unbiased);
            }
            nn_st_rt(mean, c, sdt, mu);
            nn_st_rt(invstd, c, sdt, is);
        }
        const double a = (weight ? nn_ld_rt(weight, c, wdt) : 1.0) * is;
        const double b = (bias ? nn_ld_rt(bias, c, wdt) : 0.0) - mu * a;
        CHANNEL_FOR(i, nn_st<DT>(out, i, nn_ld<DT>(inp, i) * a + b))
    }
}

/* Eval: mean = running_mean, invstd = 1/sqrt(running_var + eps), written once per channel. */
__global__ void bn_eval_stats_kernel(void *mean, void *invstd, const void *running_mean, const void *running_var,
                                     int64_t C, int rdt, int sdt, double eps) {
    GM_CU_GRID_STRIDE(c, C) {
        nn_st_rt(mean, c, sdt, nn_ld_rt(running_mean, c, rdt));
        nn_st_rt(invstd, c, sdt, 1.0 / sqrt(nn_ld_rt(running_var, c, rdt) + eps));
    }
}

/* Eval: out = x * a_c + b_c with a, b computed in double from the running statistics, as the CPU. Blocks walk
 * the N*C rows of HW elements; rows shorter than a block take one thread per element instead (then a, b are
 * computed per element: a few flops against a 2-d input's short rows). */
template <int DT, bool ROWS>
__global__ void bn_eval_kernel(void *out, const void *inp, const void *running_mean, const void *running_var,
                               const void *weight, const void *bias, int64_t N, int64_t C, int64_t HW, int wdt,
                               int rdt, double eps) {
    if (ROWS) {
        for (int64_t r = blockIdx.x; r < N * C; r += gridDim.x) {
            const int64_t c = r % C;
            const double is = 1.0 / sqrt(nn_ld_rt(running_var, c, rdt) + eps);
            const double a = (weight ? nn_ld_rt(weight, c, wdt) : 1.0) * is;
            const double b = (bias ? nn_ld_rt(bias, c, wdt) : 0.0) - nn_ld_rt(running_mean, c, rdt) * a;
            for (int64_t i = r * HW + threadIdx.x; i < (r + 1) * HW; i += blockDim.x)
                nn_st<DT>(out, i, nn_ld<DT>(inp, i) * a + b);
        }
    } else {
        GM_CU_GRID_STRIDE(i, N * C * HW) {
            const int64_t c = (HW == 1 ? i : i / HW) % C;
            const double is = 1.0 / sqrt(nn_ld_rt(running_var, c, rdt) + eps);
            const double a = (weight ? nn_ld_rt(weight, c, wdt) : 1.0) * is;
            const double b = (bias ? nn_ld_rt(bias, c, wdt) : 0.0) - nn_ld_rt(running_mean, c, rdt) * a;
            nn_st<DT>(out, i, nn_ld<DT>(inp, i) * a + b);
        }
    }
}

template <int DT>
__global__ void bn_backward_kernel(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                                   const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C,
                                   int64_t HW, int wdt, int sdt, int training) {
    const int64_t cnt = N * HW;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        const double mu = nn_ld_rt(mean, c, sdt), is = nn_ld_rt(invstd, c, sdt);
        const double w = weight ? nn_ld_rt(weight, c, wdt) : 1.0;
        double sg = 0.0, sgx = 0.0; /* sum(g), sum(g * (x - mean)) */
        if (dweight || training) {
            CHANNEL_FOR(i, const double g = nn_ld<DT>(dout, i); sg += g; sgx += g * (nn_ld<DT>(inp, i) - mu))
        } else if (dbias) { /* eval without dweight: inp is not read (and may be NULL) */
            CHANNEL_FOR(i, sg += nn_ld<DT>(dout, i))
        }
        /* the conditions are the same for every thread of the block: all of them reach the reductions */
        if (dweight || training || dbias) {
            sg = gm_cu_block_reduce(sg, gm_cu_sum());
            sgx = gm_cu_block_reduce(sgx, gm_cu_sum());
        }
        if (threadIdx.x == 0) {
            if (dbias) nn_st_rt(dbias, c, wdt, sg);
            if (dweight) nn_st_rt(dweight, c, wdt, sgx * is);
        }
        if (dinp) {
            const double k = w * is;
            if (training) {
                const double mg = sg / (double)cnt, proj = sgx * is * is / (double)cnt;
                CHANNEL_FOR(i, nn_st<DT>(dinp, i, k * (nn_ld<DT>(dout, i) - mg - (nn_ld<DT>(inp, i) - mu) * proj)))
            } else {
                CHANNEL_FOR(i, nn_st<DT>(dinp, i, k * nn_ld<DT>(dout, i)))
            }
        }
    }
}

/* Blocks for a one-block-per-channel kernel. */
static unsigned channel_blocks(int64_t C) {
    return (unsigned)(C < 1 ? 1 : C > GM_CU_MAX_BLOCKS ? GM_CU_MAX_BLOCKS : C);
}

extern "C" int cuda_batchnorm_forward(void *out, void *mean, void *invstd, void *running_mean, void *running_var,
                                      const void *inp, const void *weight, const void *bias, int64_t N, int64_t C,
                                      int64_t HW, gm_dtype dt, gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training,
                                      double momentum, double eps, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0) return GM_ERR_ARG;
    const int64_t cnt = N * HW;
    if (training ? cnt < 1 : (!running_mean || !running_var)) return GM_ERR_ARG;
    if (C == 0) return GM_OK;
    if (training) {
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &bn_train_kernel<DT>;                                                                      \
        GM_LAUNCH(k, channel_blocks(C), GM_CU_THREADS, ctx, out, mean, invstd, running_mean, running_var, inp, \
                  weight, bias, N, C, HW, (int)wdt, (int)rdt, (int)sdt, momentum, eps);                      \
    }
        NN_CU_DISPATCH(dt, CALL)
#undef CALL
    } else {
        GM_LAUNCH(bn_eval_stats_kernel, gm_cu_blocks(C, ctx), GM_CU_THREADS, ctx, mean, invstd,
                  (const void *)running_mean, (const void *)running_var, C, (int)rdt, (int)sdt, eps);
        if (cnt > 0) {
            const bool rows = HW >= 32;
            const unsigned grid = rows ? (unsigned)gm_cu_min<int64_t>(N * C, GM_CU_MAX_BLOCKS) : gm_cu_blocks(N * C * HW, ctx);
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = rows ? &bn_eval_kernel<DT, true> : &bn_eval_kernel<DT, false>;                             \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, out, inp, (const void *)running_mean, (const void *)running_var,   \
                  weight, bias, N, C, HW, (int)wdt, (int)rdt, eps);                                          \
    }
            NN_CU_DISPATCH(dt, CALL)
#undef CALL
        }
    }
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_batchnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                                       const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C,
                                       int64_t HW, gm_dtype dt, gm_dtype wdt, gm_dtype sdt, int training,
                                       gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0 || (!inp && (dweight || training))) return GM_ERR_ARG;
    if (C == 0 || (!dinp && !dweight && !dbias)) return GM_OK;
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &bn_backward_kernel<DT>;                                                                   \
        GM_LAUNCH(k, channel_blocks(C), GM_CU_THREADS, ctx, dinp, dweight, dbias, dout, inp, weight, mean, invstd, \
                  N, C, HW, (int)wdt, (int)sdt, training);                                                   \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
