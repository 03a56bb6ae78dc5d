/* kernels/cpu/norm.c — batch normalization (see norm.h). Channels are independent: one OpenMP iteration per
 * channel, each walking its N runs of HW contiguous elements (the inner loops vectorize). Per-channel values
 * (weight, running statistics, saved mean/invstd) are read through their runtime dtypes, once per channel. */
#include "norm.h"
#include "nn_bf16.h"
#include "norm_f32.h"
#include "nn_dtype.h"
#include "norm_channel.h"

/* Run BODY for each element index I of channel c of an (N, C, HW) array. */
#define CHANNEL_LOOP(I, ...)                                                                                 \
    for (int64_t n_ = 0; n_ < N; n_++) {                                                                     \
        const int64_t base_ = (n_ * C + c) * HW;                                                             \
        for (int64_t I = base_; I < base_ + HW; I++) { __VA_ARGS__; }                                        \
    }

int batchnorm_forward(void *out, void *mean, void *invstd, void *running_mean, void *running_var, const void *inp,
                      const void *weight, const void *bias, int64_t N, int64_t C, int64_t HW, gm_dtype dt,
                      gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training, double momentum, double eps,
                      int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0) return GM_ERR_ARG;
    const int64_t cnt = N * HW;
    if (training ? cnt < 1 : (!running_mean || !running_var)) return GM_ERR_ARG;
    if (dt == GM_BF16) { /* AVX-512 bfloat16 loops where the CPU has them (nn_bf16.h) */
        const int s = batchnorm_forward_bf16(out, mean, invstd, running_mean, running_var, inp, weight, bias, N, C,
                                             HW, wdt, rdt, sdt, training, momentum, eps, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    if (dt == GM_F32) { /* the same double arithmetic in AVX-512 lanes (norm_f32.h) */
        const int s = batchnorm_forward_f32(out, mean, invstd, running_mean, running_var, inp, weight, bias, N, C, HW,
                                            wdt, rdt, sdt, training, momentum, eps, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    const int nt = nn_threads(cnt * C, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t c = 0; c < C; c++) {
        double mu = 0.0, ss = 0.0;
        if (training) {
            double s = 0.0;
            CHANNEL_LOOP(i, s += nn_ld(inp, i, DT))
            mu = s / (double)cnt;
            CHANNEL_LOOP(i, const double d = nn_ld(inp, i, DT) - mu; ss += d * d)
        }
        double a, b;
        bn_channel_affine(c, training, mu, ss, cnt, mean, invstd, running_mean, running_var, weight, bias, wdt, rdt,
                          sdt, momentum, eps, &a, &b);
        /* out = x * a + b' with a = w * invstd, b' = bias - mean * a: one multiply-add per element */
        CHANNEL_LOOP(i, nn_st(out, i, DT, nn_ld(inp, i, DT) * a + b))
    })
    return GM_OK;
}

int batchnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                       const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C, int64_t HW,
                       gm_dtype dt, gm_dtype wdt, gm_dtype sdt, int training, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0 || (!inp && (dweight || training))) return GM_ERR_ARG;
    if (dt == GM_BF16) {
        const int s = batchnorm_backward_bf16(dinp, dweight, dbias, dout, inp, weight, mean, invstd, N, C, HW, wdt,
                                              sdt, training, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    if (dt == GM_F32) {
        const int s = batchnorm_backward_f32(dinp, dweight, dbias, dout, inp, weight, mean, invstd, N, C, HW, wdt, sdt,
                                             training, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    const int64_t cnt = N * HW;
    const int nt = nn_threads(cnt * C, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t c = 0; c < C; c++) {
        const double mu = nn_ld(mean, c, sdt), is = nn_ld(invstd, c, sdt);
        const double w = weight ? nn_ld(weight, c, wdt) : 1.0;
        double sg = 0.0, sgx = 0.0; /* sum(g), sum(g * (x - mean)) */
        if (dweight || training) {
            CHANNEL_LOOP(i, const double g = nn_ld(dout, i, DT); sg += g; sgx += g * (nn_ld(inp, i, DT) - mu))
        } else if (dbias) { /* eval without dweight: inp is not read (and may be NULL) */
            CHANNEL_LOOP(i, sg += nn_ld(dout, i, DT))
        }
        if (dbias) nn_st(dbias, c, wdt, sg);
        if (dweight) nn_st(dweight, c, wdt, sgx * is);
        if (dinp) {
            const double k = w * is;
            if (training) {
                /* dx = w*invstd * (g - mean(g) - (x - mean) * invstd^2 * mean(g * (x - mean))) */
                const double mg = sg / (double)cnt, proj = sgx * is * is / (double)cnt;
                CHANNEL_LOOP(i, nn_st(dinp, i, DT, k * (nn_ld(dout, i, DT) - mg - (nn_ld(inp, i, DT) - mu) * proj)))
            } else {
                CHANNEL_LOOP(i, nn_st(dinp, i, DT, k * nn_ld(dout, i, DT)))
            }
        }
    })
    return GM_OK;
}
