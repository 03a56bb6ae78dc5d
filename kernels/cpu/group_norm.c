/* kernels/cpu/group_norm.c — group normalization (see group_norm.h). Groups are independent: one OpenMP
 * iteration per (n, g) group for the forward and the input gradient; the weight and bias gradients sum over
 * n instead, so they are split by blocks of channels, each walking n outermost (for layer norm's (R, M) rows,
 * where a channel is one element per row, the block's elements of a row are contiguous). Per-channel and
 * per-group values are read through their runtime dtypes.
 *
 * Every loop over a channel's elements is an `omp simd` loop, its sums vector reductions, in functions built for
 * AVX-512 and AVX2 too (GM_VEC_CLONES): scalar, with one sum waiting on the last, a (16, 64, 32, 32) group norm
 * took 0.94 ms forward against 0.26. A sum's order then depends on the vector width, never on the threads. */
#include "group_norm.h"
#include "nn_dtype.h"
#include "vec_math.h"

/* Channels per block of the weight/bias gradients: partial sums on the stack, enough blocks for the threads. */
#define GN_CBLOCK 64

/* Layer norm's case: one group, HW == 1 (a row of C elements, each its own channel), the weight and bias in the
 * input's dtype. The general loops read each element's weight through its runtime dtype, a switch per element
 * that keeps them scalar (2 ns an element); here every per-element loop is one `omp simd` loop at compile-time
 * dtypes, built for AVX-512 and AVX2 too (GM_VEC_CLONES). Each element's arithmetic is the general loop's; only
 * the row sums are vector reductions, so their order differs (a few units in the last place of a double). The
 * rows' partition never changes a result: the same at any thread count. */
static int gn_is_rows(int64_t HW, int64_t G, gm_dtype dt, gm_dtype wdt) { return HW == 1 && G == 1 && wdt == dt; }

/* Blocks of the weight/bias gradients over nt threads: (C + cb - 1) / cb blocks of cb channels. */
static int64_t gn_channel_block(int64_t C, int nt) {
    int64_t cb = nt > 1 ? (C + nt - 1) / nt : GN_CBLOCK;
    if (cb > GN_CBLOCK) cb = GN_CBLOCK;
    return cb < 1 ? 1 : cb;
}

GM_VEC_CLONES static void gn_rows_forward(void *out, void *mean, void *rstd, const void *inp, const void *weight,
                                          const void *bias, int64_t R, int64_t M, gm_dtype dt, gm_dtype sdt,
                                          double eps, int nthreads) {
    const int nt = nn_threads(R * M, nthreads);
    (void)nt;
    const double w1 = 1.0, b0 = 0.0; /* what an absent weight or bias stands for */
    const int64_t ws = weight ? 1 : 0, bs = bias ? 1 : 0;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t r = 0; r < R; r++) {
        const int64_t base = r * M;
        double s = 0.0, ss = 0.0;
        _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < M; i++) s += nn_ld(inp, base + i, DT);
        const double mu = M ? s / (double)M : 0.0;
        _Pragma("omp simd reduction(+ : ss)") for (int64_t i = 0; i < M; i++) {
            const double d = nn_ld(inp, base + i, DT) - mu;
            ss += d * d;
        }
        const double is = 1.0 / sqrt((M ? ss / (double)M : 0.0) + eps);
        nn_st(mean, r, sdt, mu);
        nn_st(rstd, r, sdt, is);
        _Pragma("omp simd") for (int64_t i = 0; i < M; i++) {
            const double a = (ws ? nn_ld(weight, i, DT) : w1) * is;
            const double b = (bs ? nn_ld(bias, i, DT) : b0) - mu * a;
            nn_st(out, base + i, DT, nn_ld(inp, base + i, DT) * a + b);
        }
    })
}

GM_VEC_CLONES static void gn_rows_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                                           const void *weight, const void *mean, const void *rstd, int64_t R,
                                           int64_t M, gm_dtype dt, gm_dtype sdt, int nthreads) {
    const int nt = nn_threads(R * M, nthreads);
    (void)nt;
    if (dweight || dbias) { /* first: dinp may be written over dout */
        const int64_t cb = gn_channel_block(M, nt), nblocks = (M + cb - 1) / cb;
        NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
        for (int64_t blk = 0; blk < nblocks; blk++) {
            const int64_t c0 = blk * cb, n = c0 + cb < M ? cb : M - c0;
            double sw[GN_CBLOCK] = {0}, sb[GN_CBLOCK] = {0};
            for (int64_t r = 0; r < R; r++) {
                const double mu = nn_ld(mean, r, sdt), is = nn_ld(rstd, r, sdt);
                const int64_t o = r * M + c0;
                _Pragma("omp simd") for (int64_t c = 0; c < n; c++) {
                    const double g = nn_ld(dout, o + c, DT);
                    sb[c] += g;
                    sw[c] += g * (nn_ld(inp, o + c, DT) - mu) * is;
                }
            }
            for (int64_t c = 0; c < n; c++) {
                if (dweight) nn_st(dweight, c0 + c, DT, sw[c]);
                if (dbias) nn_st(dbias, c0 + c, DT, sb[c]);
            }
        })
    }
    if (!dinp) return;
    const double w1 = 1.0;
    const int64_t ws = weight ? 1 : 0;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t r = 0; r < R; r++) {
        const int64_t base = r * M;
        const double mu = nn_ld(mean, r, sdt), is = nn_ld(rstd, r, sdt);
        double s1 = 0.0, s2 = 0.0; /* sum(wg), sum(wg * (x - mean)) */
        _Pragma("omp simd reduction(+ : s1, s2)") for (int64_t i = 0; i < M; i++) {
            const double wg = (ws ? nn_ld(weight, i, DT) : w1) * nn_ld(dout, base + i, DT);
            s1 += wg;
            s2 += wg * (nn_ld(inp, base + i, DT) - mu);
        }
        const double m1 = M ? s1 / (double)M : 0.0, proj = M ? s2 * is * is / (double)M : 0.0;
        _Pragma("omp simd") for (int64_t i = 0; i < M; i++) {
            const double w = ws ? nn_ld(weight, i, DT) : w1, xc = nn_ld(inp, base + i, DT) - mu;
            nn_st(dinp, base + i, DT, is * (w * nn_ld(dout, base + i, DT) - m1 - xc * proj));
        }
    })
}

GM_VEC_CLONES int groupnorm_forward(void *out, void *mean, void *rstd, const void *inp, const void *weight,
                                    const void *bias, int64_t N, int64_t C, int64_t HW, int64_t G, gm_dtype dt,
                                    gm_dtype wdt, gm_dtype sdt, double eps, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0 || G < 1 || C % G) return GM_ERR_ARG;
    if (gn_is_rows(HW, G, dt, wdt)) {
        gn_rows_forward(out, mean, rstd, inp, weight, bias, N, C, dt, sdt, eps, nthreads);
        return GM_OK;
    }
    const int64_t D = C / G, M = D * HW;
    const int nt = nn_threads(N * C * HW, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t r = 0; r < N * G; r++) {
        const int64_t base = r * M, c0 = (r % G) * D;
        double s = 0.0, ss = 0.0;
        _Pragma("omp simd reduction(+ : s)") for (int64_t i = base; i < base + M; i++) s += nn_ld(inp, i, DT);
        const double mu = M ? s / (double)M : 0.0;
        _Pragma("omp simd reduction(+ : ss)") for (int64_t i = base; i < base + M; i++) {
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
            _Pragma("omp simd") for (int64_t i = o; i < o + HW; i++) nn_st(out, i, DT, nn_ld(inp, i, DT) * a + b);
        }
    })
    return GM_OK;
}

GM_VEC_CLONES int groupnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                                     const void *weight, const void *mean, const void *rstd, int64_t N, int64_t C,
                                     int64_t HW, int64_t G, gm_dtype dt, gm_dtype wdt, gm_dtype sdt, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 0 || HW < 0 || G < 1 || C % G || !inp) return GM_ERR_ARG;
    if (gn_is_rows(HW, G, dt, wdt)) {
        gn_rows_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, dt, sdt, nthreads);
        return GM_OK;
    }
    const int64_t D = C / G, M = D * HW;
    const int nt = nn_threads(N * C * HW, nthreads);
    (void)nt;
    if (dweight || dbias) { /* first: dinp may be written over dout */
        const int64_t cb = gn_channel_block(C, nt);
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
                    _Pragma("omp simd reduction(+ : gw, gb)") for (int64_t i = o; i < o + HW; i++) {
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
            _Pragma("omp simd reduction(+ : s1, s2)") for (int64_t i = o; i < o + HW; i++) {
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
            _Pragma("omp simd") for (int64_t i = o; i < o + HW; i++)
                nn_st(dinp, i, DT, is * (w * nn_ld(dout, i, DT) - m1 - (nn_ld(inp, i, DT) - mu) * proj));
        }
    })
    return GM_OK;
}
