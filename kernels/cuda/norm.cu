/* kernels/cuda/norm.cu — batch normalization on CUDA (see kernels/cpu/norm.h for the contract and
 * kernels/cpu/norm.c for the reference).
 *
 * A channel's N*HW elements are split into S contiguous chunks (S from the channel count and the device size,
 * bn_splits), one block per (channel, chunk), so that a layer with few channels still fills the GPU. Sums go
 * through the workspace in two steps: each block writes its chunk's partial (a block reduction in double), and
 * the next kernel's blocks of that channel each reduce the channel's S partials themselves, in the same fixed
 * order, so they all see the same (deterministic) total without another launch. Training forward is three
 * kernels: sum -> mean, squared deviations -> variance (two passes, as the CPU: no cancellation far from 0),
 * then normalise, which uses the unrounded double mean/invstd as the CPU does (the saved mean/invstd are
 * rounded to sdt; normalising with those would shift outputs of data far from 0). Backward is two kernels:
 * sum(g), sum(g (x - mean)), then the per-element gradient. Eval forward is elementwise.
 * Per-channel values (weight, running statistics, saved statistics) are read through their runtime dtypes. */
#include "norm.h"
#include "nn_common.cuh"

/* Chunks per channel: kernels/cuda/scratch_sizes.h (csrc sizes the workspace with the same function). */
static int64_t bn_splits(int64_t cnt, int64_t C, const gm_cuda_ctx *ctx) {
    return cuda_batchnorm_splits(cnt, C, ctx->sm_count);
}

/* The geometry every kernel here shares. */
struct bn_geom {
    int64_t N, C, HW, S, chunk; /* chunk: elements of a channel per block (the last one may have fewer) */
};

static bn_geom bn_make(int64_t N, int64_t C, int64_t HW, int64_t S) {
    bn_geom g;
    g.N = N;
    g.C = C;
    g.HW = HW;
    g.S = S;
    g.chunk = (N * HW + S - 1) / S;
    return g;
}

static unsigned bn_grid(const bn_geom &g) {
    return (unsigned)gm_cu_min<int64_t>(gm_cu_max<int64_t>(g.C * g.S, 1), GM_CU_MAX_BLOCKS);
}

/* For each block's (channel c, chunk s), grid-stride over the C*S pairs (the same for every thread of a block). */
#define BN_BLOCKS(g, c, s, ...)                                                                              \
    for (int64_t b_ = blockIdx.x; b_ < (g).C * (g).S; b_ += gridDim.x) {                                     \
        const int64_t c = b_ / (g).S, s = b_ - c * (g).S;                                                    \
        __VA_ARGS__                                                                                          \
    }

/* Run the statements for each element index I of chunk s of channel c, spread over the block's threads. The
 * channel's elements are its N runs of HW contiguous values; a thread's walk advances (run, position) by the
 * block size without dividing per element. */
#define CHUNK_FOR(g, c, s, I, ...)                                                                           \
    {                                                                                                        \
        const int64_t k0_ = (s) * (g).chunk, k1_ = gm_cu_min<int64_t>((g).N * (g).HW, k0_ + (g).chunk);     \
        /* (an empty chunk, HW = 0 included, divides by nothing) */                                          \
        const int64_t hw_ = k0_ < k1_ ? (g).HW : 1;                                                          \
        const int64_t dn_ = GM_CU_THREADS / hw_, dj_ = GM_CU_THREADS - dn_ * hw_;                            \
        int64_t k_ = k0_ + threadIdx.x, n_ = k_ / hw_, j_ = k_ - n_ * hw_;                                   \
        for (; k_ < k1_; k_ += GM_CU_THREADS) {                                                              \
            const int64_t I = (n_ * (g).C + (c)) * (g).HW + j_;                                              \
            __VA_ARGS__;                                                                                     \
            n_ += dn_;                                                                                       \
            j_ += dj_;                                                                                       \
            if (j_ >= (g).HW) {                                                                              \
                j_ -= (g).HW;                                                                                \
                n_++;                                                                                        \
            }                                                                                                \
        }                                                                                                    \
    }

/* Channel c's total of its S partials, by the whole block (every thread gets it). */
__device__ __forceinline__ double bn_total(const double *part, const bn_geom &g, int64_t c) {
    double v = 0.0;
    for (int64_t k = threadIdx.x; k < g.S; k += GM_CU_THREADS) v += part[c * g.S + k];
    return gm_cu_block_reduce(v, gm_cu_sum());
}

template <int DT> __global__ void bn_sum_kernel(double *psum, const void *inp, bn_geom g) {
    BN_BLOCKS(g, c, s, {
        double v = 0.0;
        CHUNK_FOR(g, c, s, i, v += nn_ld<DT>(inp, i))
        v = gm_cu_block_reduce(v, gm_cu_sum());
        if (threadIdx.x == 0) psum[c * g.S + s] = v;
    })
}

template <int DT> __global__ void bn_sqdev_kernel(double *pss, const double *psum, const void *inp, bn_geom g) {
    const double cnt = (double)(g.N * g.HW);
    BN_BLOCKS(g, c, s, {
        const double mu = bn_total(psum, g, c) / cnt;
        double v = 0.0;
        CHUNK_FOR(g, c, s, i, const double d = nn_ld<DT>(inp, i) - mu; v += d * d)
        v = gm_cu_block_reduce(v, gm_cu_sum());
        if (threadIdx.x == 0) pss[c * g.S + s] = v;
    })
}

template <int DT>
__global__ void bn_train_apply_kernel(void *out, void *mean, void *invstd, void *running_mean, void *running_var,
                                      const void *inp, const void *weight, const void *bias, const double *psum,
                                      const double *pss, bn_geom g, int wdt, int rdt, int sdt, double momentum,
                                      double eps) {
    const int64_t cnt = g.N * g.HW;
    BN_BLOCKS(g, c, s, {
        const double mu = bn_total(psum, g, c) / (double)cnt, ss = bn_total(pss, g, c);
        const double is = 1.0 / sqrt(ss / (double)cnt + eps);
        if (s == 0 && threadIdx.x == 0) {
            if (running_mean)
                nn_st_rt(running_mean, c, rdt, (1.0 - momentum) * nn_ld_rt(running_mean, c, rdt) + momentum * mu);
            if (running_var && cnt > 1) {
                const double unbiased = ss / (double)(cnt - 1);
                nn_st_rt(running_var, c, rdt, (1.0 - momentum) * nn_ld_rt(running_var, c, rdt) + momentum * unbiased);
            }
            nn_st_rt(mean, c, sdt, mu);
            nn_st_rt(invstd, c, sdt, is);
        }
        /* out = x * a + b' with a = w * invstd, b' = bias - mean * a */
        const double a = (weight ? nn_ld_rt(weight, c, wdt) : 1.0) * is;
        const double b = (bias ? nn_ld_rt(bias, c, wdt) : 0.0) - mu * a;
        CHUNK_FOR(g, c, s, i, nn_st<DT>(out, i, nn_ld<DT>(inp, i) * a + b))
    })
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

/* Backward sums per chunk: sum(g) and, when the input is read, sum(g * (x - mean)). */
template <int DT>
__global__ void bn_bwd_sums_kernel(double *psg, double *psgx, const void *dout, const void *inp, const void *mean,
                                   bn_geom g, int sdt) {
    BN_BLOCKS(g, c, s, {
        const double mu = nn_ld_rt(mean, c, sdt);
        double sg = 0.0, sgx = 0.0;
        if (inp) {
            CHUNK_FOR(g, c, s, i, const double gv = nn_ld<DT>(dout, i); sg += gv; sgx += gv * (nn_ld<DT>(inp, i) - mu))
        } else { /* eval without dweight: inp is not read (and may be NULL) */
            CHUNK_FOR(g, c, s, i, sg += nn_ld<DT>(dout, i))
        }
        sg = gm_cu_block_reduce(sg, gm_cu_sum());
        sgx = gm_cu_block_reduce(sgx, gm_cu_sum());
        if (threadIdx.x == 0) {
            psg[c * g.S + s] = sg;
            psgx[c * g.S + s] = sgx;
        }
    })
}

/* dbias, dweight (chunk 0 of each channel) and dinp (every chunk); psg/psgx NULL when nothing was summed. */
template <int DT>
__global__ void bn_bwd_apply_kernel(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                                    const void *weight, const void *mean, const void *invstd, const double *psg,
                                    const double *psgx, bn_geom g, int wdt, int sdt, int training) {
    const double cnt = (double)(g.N * g.HW);
    BN_BLOCKS(g, c, s, {
        const double mu = nn_ld_rt(mean, c, sdt), is = nn_ld_rt(invstd, c, sdt);
        const double w = weight ? nn_ld_rt(weight, c, wdt) : 1.0;
        double sg = 0.0, sgx = 0.0;
        if (psg) { /* the same for every block of the launch */
            sg = bn_total(psg, g, c);
            sgx = bn_total(psgx, g, c);
        }
        if (s == 0 && threadIdx.x == 0) {
            if (dbias) nn_st_rt(dbias, c, wdt, sg);
            if (dweight) nn_st_rt(dweight, c, wdt, sgx * is);
        }
        if (dinp) {
            const double k = w * is;
            if (training) {
                /* dx = w*invstd * (g - mean(g) - (x - mean) * invstd^2 * mean(g * (x - mean))) */
                const double mg = sg / cnt, proj = sgx * is * is / cnt;
                CHUNK_FOR(g, c, s, i,
                          nn_st<DT>(dinp, i, k * (nn_ld<DT>(dout, i) - mg - (nn_ld<DT>(inp, i) - mu) * proj)))
            } else {
                CHUNK_FOR(g, c, s, i, nn_st<DT>(dinp, i, k * nn_ld<DT>(dout, i)))
            }
        }
    })
}

extern "C" int cuda_batchnorm_forward(void *out, void *mean, void *invstd, void *running_mean, void *running_var,
                                      const void *inp, const void *weight, const void *bias, int64_t N, int64_t C,
                                      int64_t HW, gm_dtype dt, gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training,
                                      double momentum, double eps, void *workspace, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0) return GM_ERR_ARG;
    const int64_t cnt = N * HW;
    if (training ? (cnt < 1 || (C > 0 && !workspace)) : (!running_mean || !running_var)) return GM_ERR_ARG;
    if (C == 0) return GM_OK;
    if (training) {
        const bn_geom g = bn_make(N, C, HW, bn_splits(cnt, C, ctx));
        double *psum = (double *)workspace, *pss = psum + C * g.S;
        const unsigned grid = bn_grid(g);
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k1 = &bn_sum_kernel<DT>;                                                                       \
        GM_LAUNCH(k1, grid, GM_CU_THREADS, ctx, psum, inp, g);                                               \
        auto *k2 = &bn_sqdev_kernel<DT>;                                                                     \
        GM_LAUNCH(k2, grid, GM_CU_THREADS, ctx, pss, (const double *)psum, inp, g);                          \
        auto *k3 = &bn_train_apply_kernel<DT>;                                                               \
        GM_LAUNCH(k3, grid, GM_CU_THREADS, ctx, out, mean, invstd, running_mean, running_var, inp, weight, bias,  \
                  (const double *)psum, (const double *)pss, g, (int)wdt, (int)rdt, (int)sdt, momentum, eps);     \
    }
        NN_CU_DISPATCH(dt, CALL)
#undef CALL
    } else {
        GM_LAUNCH(bn_eval_stats_kernel, gm_cu_blocks(C, ctx), GM_CU_THREADS, ctx, mean, invstd,
                  (const void *)running_mean, (const void *)running_var, C, (int)rdt, (int)sdt, eps);
        if (cnt > 0) {
            const bool rows = HW >= 32;
            const unsigned grid =
                rows ? (unsigned)gm_cu_min<int64_t>(N * C, GM_CU_MAX_BLOCKS) : gm_cu_blocks(N * C * HW, ctx);
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
                                       void *workspace, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0 || (!inp && (dweight || training))) return GM_ERR_ARG;
    const bool reduce = training || dweight || dbias;
    if (reduce && C > 0 && !workspace) return GM_ERR_ARG;
    if (C == 0 || (!dinp && !dweight && !dbias)) return GM_OK;
    const bn_geom g = bn_make(N, C, HW, bn_splits(N * HW, C, ctx));
    double *psg = reduce ? (double *)workspace : NULL, *psgx = reduce ? psg + C * g.S : NULL;
    const unsigned grid = bn_grid(g);
    /* the input is summed against only where the CPU reads it: training or the weight's gradient */
    const void *sum_inp = (dweight || training) ? inp : NULL;
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        if (reduce) {                                                                                        \
            auto *k1 = &bn_bwd_sums_kernel<DT>;                                                              \
            GM_LAUNCH(k1, grid, GM_CU_THREADS, ctx, psg, psgx, dout, sum_inp, mean, g, (int)sdt);            \
        }                                                                                                    \
        auto *k2 = &bn_bwd_apply_kernel<DT>;                                                                 \
        GM_LAUNCH(k2, grid, GM_CU_THREADS, ctx, dinp, dweight, dbias, dout, inp, weight, mean, invstd,       \
                  (const double *)psg, (const double *)psgx, g, (int)wdt, (int)sdt, training);               \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
