/* kernels/cpu/group_norm.c — group normalization (see group_norm.h). Groups are independent: one OpenMP
 * iteration per (n, g) group for the forward and the input gradient; the weight and bias gradients sum over
 * n instead, so they are split by blocks of channels, each walking n outermost (for layer norm's (R, M) rows,
 * where a channel is one element per row, the block's elements of a row are contiguous). Per-channel and
 * per-group values are read through their runtime dtypes. */
#include "group_norm.h"
#include "nn_dtype.h"

/* Channels per block of the weight/bias gradients: partial sums on the stack, enough blocks for the threads. */
#define GN_CBLOCK 64

int groupnorm_forward(void *out, void *mean, void *rstd, const void *inp, const void *weight, const void *bias,
                      int64_t N, int64_t C, int64_t HW, int64_t G, gm_dtype dt, gm_dtype wdt, gm_dtype sdt,
                      double eps, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0 || G < 1 || C % G) return GM_ERR_ARG;
    const int64_t D = C / G, M = D * HW;
    const int nt = nn_threads(N * C * HW, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t r = 0; r < N * G; r++) {
        const int64_t base = r * M, c0 = (r % G) * D;
        double s = 0.0, ss = 0.0;
        for (int64_t i = base; i < base + M; i++) s += nn_ld(inp, i, DT);
        const double mu = M ? s / (double)M : 0.0;
        for (int64_t i = base; i < base + M; i++) {
            const double d = nn_ld(inp, i, DT) - mu;
            ss += d * d;
        }
        const double is = 1.0 / sqrt((M ? ss / (double)M : 0.0) + eps);
        nn_st(mean, r, sdt, mu);
        nn_st(rstd, r, sdt, is);
        for (int64_t d = 0; d < D; d++) {
            /* out = x * a + b' with a = w * rstd, b' = bias - mean * a: one multiply-add per element */
            const double a = (weight ? nn_ld(weight, c0 + d, wdt) : 1.0) * is;
            const double b = (bias ? nn_ld(bias, c0 + d, wdt) : 0.0) - mu * a;
            const int64_t o = base + d * HW;
            for (int64_t i = o; i < o + HW; i++) nn_st(out, i, DT, nn_ld(inp, i, DT) * a + b);
        }
    })
    return GM_OK;
}

int groupnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp, const void *weight,
                       const void *mean, const void *rstd, int64_t N, int64_t C, int64_t HW, int64_t G, gm_dtype dt,
                       gm_dtype wdt, gm_dtype sdt, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0 || G < 1 || C % G || !inp) return GM_ERR_ARG;
    const int64_t D = C / G, M = D * HW;
    const int nt = nn_threads(N * C * HW, nthreads);
    (void)nt;
    if (dweight || dbias) { /* first: dinp may be written over dout */
        int64_t cb = nt > 1 ? (C + nt - 1) / nt : GN_CBLOCK;
        if (cb > GN_CBLOCK) cb = GN_CBLOCK;
        if (cb < 1) cb = 1;
        const int64_t nblocks = (C + cb - 1) / cb;
        NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
        for (int64_t blk = 0; blk < nblocks; blk++) {
            const int64_t c0 = blk * cb, c1 = c0 + cb < C ? c0 + cb : C;
            double sw[GN_CBLOCK] = {0}, sb[GN_CBLOCK] = {0};
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = c0; c < c1; c++) {
                    const int64_t r = n * G + c / D, o = (n * C + c) * HW;
                    const double mu = nn_ld(mean, r, sdt), is = nn_ld(rstd, r, sdt);
                    double gw = 0.0, gb = 0.0;
                    for (int64_t i = o; i < o + HW; i++) {
                        const double g = nn_ld(dout, i, DT);
                        gb += g;
                        gw += g * (nn_ld(inp, i, DT) - mu);
                    }
                    sw[c - c0] += gw * is;
                    sb[c - c0] += gb;
                }
            for (int64_t c = c0; c < c1; c++) {
                if (dweight) nn_st(dweight, c, wdt, sw[c - c0]);
                if (dbias) nn_st(dbias, c, wdt, sb[c - c0]);
            }
        })
    }
    if (!dinp) return GM_OK;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t r = 0; r < N * G; r++) {
        const int64_t base = r * M, c0 = (r % G) * D;
        const double mu = nn_ld(mean, r, sdt), is = nn_ld(rstd, r, sdt);
        double s1 = 0.0, s2 = 0.0; /* sum(wg), sum(wg * (x - mean)) */
        for (int64_t d = 0; d < D; d++) {
            const double w = weight ? nn_ld(weight, c0 + d, wdt) : 1.0;
            const int64_t o = base + d * HW;
            for (int64_t i = o; i < o + HW; i++) {
                const double wg = w * nn_ld(dout, i, DT);
                s1 += wg;
                s2 += wg * (nn_ld(inp, i, DT) - mu);
            }
        }
        /* dx = rstd * (wg - mean(wg) - (x - mean) * rstd^2 * mean(wg * (x - mean))) */
        const double m1 = M ? s1 / (double)M : 0.0, proj = M ? s2 * is * is / (double)M : 0.0;
        for (int64_t d = 0; d < D; d++) {
            const double w = weight ? nn_ld(weight, c0 + d, wdt) : 1.0;
            const int64_t o = base + d * HW;
            for (int64_t i = o; i < o + HW; i++)
                nn_st(dinp, i, DT, is * (w * nn_ld(dout, i, DT) - m1 - (nn_ld(inp, i, DT) - mu) * proj));
        }
    })
    return GM_OK;
}
