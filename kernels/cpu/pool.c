/* kernels/cpu/pool.c — max / average / adaptive-average 2-D pooling, forward and backward (pool.h).
 *
 * Forward: threads split the output rows (n, c, oh) and read the input through its strides, so a view needs no
 * copy. Backward scatters each output's gradient into its window; threads split the (n, c) planes, which are
 * disjoint, so no two threads ever add into the same element and the result does not depend on the thread
 * count. Sums are taken in double. The window arithmetic is PyTorch's (aten/src/ATen/native/cpu/
 * MaxPoolKernel.cpp, AvgPoolKernel.cpp, AdaptiveAvgPoolKernel.cpp), so sizes, tie-breaking and divisors match;
 * it lives in pool_window.h, shared with kernels/cuda/pool.cu. */
#include "pool.h"
#include "../pool_window.h"
#include "pool_2x2.h"

#include <math.h>

/* Zero a contiguous float plane of n elements (all-zero bits are +0.0 in every float dtype). */
static void zero(void *p, gm_dtype dt, int64_t n) { memset(p, 0, (size_t)n * gm_dtype_size(dt)); }

/* ---- max ------------------------------------------------------------------------------------------------ */

/* The max of output (oh, ow)'s window in plane `base` of inp in *best_out, and an index of the argmax that walks
 * alongside the taps: `first` at the window's first tap in range, +dj along a row, +di from row to row (-1 for an
 * empty window). Strictly greater keeps the first maximum; a NaN always wins (the last one), as in PyTorch. */
static inline __attribute__((always_inline)) int64_t window_max_at(gm_dtype dt, const void *inp, const int64_t in[4],
                                                                   const pool2d_geom *g, int64_t base, int64_t h0,
                                                                   int64_t nh, int64_t w0, int64_t nw, int64_t first,
                                                                   int64_t di, int64_t dj, double *best_out) {
    const int64_t step_h = g->dh * in[2], step_w = g->dw * in[3];
    double best = -INFINITY;
    int64_t arg = -1, row = base + h0 * in[2] + w0 * in[3], idx_row = first;
    for (int64_t i = 0; i < nh; i++, row += step_h, idx_row += di) {
        int64_t q = row, idx = idx_row;
        for (int64_t j = 0; j < nw; j++, q += step_w, idx += dj) {
            const double v = pool_ld(dt, inp, q);
            /* Select by mask, not by branch: on real data the branch is taken at random and its
             * mispredictions cost more than the whole window. */
            const uint64_t m = -(uint64_t)((v > best) | (v != v));
            uint64_t vb, bb;
            memcpy(&vb, &v, 8);
            memcpy(&bb, &best, 8);
            bb = (vb & m) | (bb & ~m);
            memcpy(&best, &bb, 8);
            arg = (int64_t)(((uint64_t)idx & m) | ((uint64_t)arg & ~m));
        }
    }
    *best_out = best;
    return arg;
}

/* The argmax as its flat h*W + w in the plane. The forward's indices and the backward that recomputes them from
 * the input (maxpool2d_backward_input) both come from here, so they agree bit for bit. */
static inline __attribute__((always_inline)) int64_t window_argmax(gm_dtype dt, const void *inp, const int64_t in[4],
                                                                   const pool2d_geom *g, int64_t base, int64_t oh,
                                                                   int64_t ow, double *best_out) {
    int64_t h0, nh, w0, nw;
    pool_max_taps(oh, g->sh, g->ph, g->kh, g->dh, g->H, &h0, &nh);
    pool_max_taps(ow, g->sw, g->pw, g->kw, g->dw, g->W, &w0, &nw);
    return window_max_at(dt, inp, in, g, base, h0, nh, w0, nw, h0 * g->W + w0, g->dh * g->W, g->dw, best_out);
}

static inline __attribute__((always_inline)) void maxpool_row(gm_dtype dt, void *out, int64_t *ind,
                                                              const void *inp, const int64_t in[4],
                                                              const pool2d_geom *g, int64_t r) {
    const int64_t oh = r % g->OH, nc = r / g->OH, n = nc / g->C, c = nc % g->C;
    const int64_t base = n * in[0] + c * in[1];
    for (int64_t ow = 0; ow < g->OW; ow++) {
        double best = -INFINITY;
        if (ind) {
            ind[r * g->OW + ow] = window_argmax(dt, inp, in, g, base, oh, ow, &best);
            pool_st(dt, out, r * g->OW + ow, best);
            continue;
        }
        /* Values only (inference): a plain running max compiles to maxsd, no unpredictable branch; a NaN
         * anywhere in the window makes the result NaN, as in PyTorch. */
        int64_t h0, nh, w0, nw;
        pool_max_taps(oh, g->sh, g->ph, g->kh, g->dh, g->H, &h0, &nh);
        pool_max_taps(ow, g->sw, g->pw, g->kw, g->dw, g->W, &w0, &nw);
        int64_t row = base + h0 * in[2] + w0 * in[3];
        int nan = 0;
        for (int64_t i = 0; i < nh; i++, row += g->dh * in[2]) {
            int64_t q = row;
            for (int64_t j = 0; j < nw; j++, q += g->dw * in[3]) {
                const double v = pool_ld(dt, inp, q);
                best = v > best ? v : best;
                nan |= v != v;
            }
        }
        pool_st(dt, out, r * g->OW + ow, nan ? NAN : best);
    }
}

int maxpool2d_forward(void *out, int64_t *indices, const void *inp, const int64_t in[4], gm_dtype dt,
                      const pool2d_geom *g, int nthreads) {
    if (!pool_geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    if (!indices) { /* 2x2 stride-2 windows of bfloat16/float32 on AVX-512 (pool_2x2.h), same results */
        const int s = maxpool2x2_forward(out, inp, in, dt, g, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    const int64_t rows = g->N * g->C * g->OH;
    const int nt = pool_team(nthreads, rows, rows * g->OW * g->kh * g->kw);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++) POOL_DISPATCH(dt, maxpool_row(DT, out, indices, inp, in, g, r));
    return GM_OK;
}

static inline __attribute__((always_inline)) int maxpool_plane_bwd(gm_dtype dt, void *dinp, const void *dout,
                                                                   const int64_t ds[4], const int64_t *ind,
                                                                   const pool2d_geom *g, int64_t p) {
    const int64_t n = p / g->C, c = p % g->C, HW = g->H * g->W;
    const int64_t obase = n * ds[0] + c * ds[1];
    const int64_t *pi = ind + p * g->OH * g->OW;
    char *plane = (char *)dinp + p * HW * (int64_t)gm_dtype_size(dt);
    zero(plane, dt, HW);
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow++) {
            int64_t i = pi[oh * g->OW + ow];
            if (i == -1) continue; /* an empty window: nothing was read, nothing to send back */
            if (i < 0 || i >= HW) return GM_ERR_ARG;
            pool_add_at(dt, plane, i, pool_ld(dt, dout, obase + oh * ds[2] + ow * ds[3]));
        }
    return GM_OK;
}

int maxpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], const int64_t *indices, gm_dtype dt,
                       const pool2d_geom *g, int nthreads) {
    if (!pool_geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    const int64_t planes = g->N * g->C;
    const int nt = pool_team(nthreads, planes, planes * (g->H * g->W + g->OH * g->OW));
    int status = GM_OK;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        int st = GM_OK;
        POOL_DISPATCH(dt, st = maxpool_plane_bwd(DT, dinp, dout, ds, indices, g, p));
        if (st != GM_OK) {
#pragma omp atomic write
            status = st;
        }
    }
    return status;
}

/* One plane of maxpool2d_backward_input: the argmax of each window found again in the input. */
static inline __attribute__((always_inline)) void maxpool_plane_bwd_input(gm_dtype dt, void *dinp, const void *dout,
                                                                          const int64_t ds[4], const void *inp,
                                                                          const int64_t in[4], const pool2d_geom *g,
                                                                          int64_t p) {
    const int64_t n = p / g->C, c = p % g->C, HW = g->H * g->W;
    const int64_t obase = n * ds[0] + c * ds[1], ibase = n * in[0] + c * in[1];
    char *plane = (char *)dinp + p * HW * (int64_t)gm_dtype_size(dt);
    zero(plane, dt, HW);
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow++) {
            double best;
            const int64_t i = window_argmax(dt, inp, in, g, ibase, oh, ow, &best);
            if (i >= 0) pool_add_at(dt, plane, i, pool_ld(dt, dout, obase + oh * ds[2] + ow * ds[3]));
        }
}

int maxpool2d_backward_input(void *dinp, const void *dout, const int64_t ds[4], const void *inp,
                             const int64_t in[4], gm_dtype dt, const pool2d_geom *g, int nthreads) {
    if (!pool_geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    {
        const int s = maxpool2x2_backward_input(dinp, dout, ds, inp, in, dt, g, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    const int64_t planes = g->N * g->C;
    const int nt = pool_team(nthreads, planes, planes * (g->H * g->W + g->OH * g->OW * g->kh * g->kw));
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t p = 0; p < planes; p++) POOL_DISPATCH(dt, maxpool_plane_bwd_input(DT, dinp, dout, ds, inp, in, g, p));
    return GM_OK;
}

/* ---- max, the argmax saved as its tap in the window ---------------------------------------------------- */

/* window_argmax with the argmax's tap in the window (pool_tap_of) tracked alongside instead of its flat position:
 * the same taps in the same order, so the same element, and no division per output. */
static inline __attribute__((always_inline)) int64_t window_argmax_tap(gm_dtype dt, const void *inp,
                                                                       const int64_t in[4], const pool2d_geom *g,
                                                                       int64_t base, int64_t oh, int64_t ow,
                                                                       double *best_out) {
    int64_t h0, nh, w0, nw;
    pool_max_taps(oh, g->sh, g->ph, g->kh, g->dh, g->H, &h0, &nh);
    pool_max_taps(ow, g->sw, g->pw, g->kw, g->dw, g->W, &w0, &nw);
    const int64_t i0 = (h0 - (oh * g->sh - g->ph)) / g->dh, j0 = (w0 - (ow * g->sw - g->pw)) / g->dw;
    return window_max_at(dt, inp, in, g, base, h0, nh, w0, nw, i0 * g->kw + j0, g->kw, 1, best_out);
}

static inline __attribute__((always_inline)) void maxpool_row_taps(gm_dtype dt, void *out, int8_t *taps,
                                                                   const void *inp, const int64_t in[4],
                                                                   const pool2d_geom *g, int64_t r) {
    const int64_t oh = r % g->OH, nc = r / g->OH, n = nc / g->C, c = nc % g->C;
    const int64_t base = n * in[0] + c * in[1];
    for (int64_t ow = 0; ow < g->OW; ow++) {
        double best;
        taps[r * g->OW + ow] = (int8_t)window_argmax_tap(dt, inp, in, g, base, oh, ow, &best);
        pool_st(dt, out, r * g->OW + ow, best);
    }
}

int maxpool2d_forward_taps(void *out, int8_t *taps, const void *inp, const int64_t in[4], gm_dtype dt,
                           const pool2d_geom *g, int nthreads) {
    if (!pool_geom_ok(g) || !gm_dtype_is_float(dt) || g->kh * g->kw > 127 || !taps) return GM_ERR_ARG;
    { /* 2x2 stride-2 windows of bfloat16/float32 on AVX-512 (pool_2x2.h), same results */
        const int s = maxpool2x2_forward_taps(out, taps, inp, in, dt, g, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    const int64_t rows = g->N * g->C * g->OH;
    const int nt = pool_team(nthreads, rows, rows * g->OW * g->kh * g->kw);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++) POOL_DISPATCH(dt, maxpool_row_taps(DT, out, taps, inp, in, g, r));
    return GM_OK;
}

static inline __attribute__((always_inline)) int maxpool_plane_bwd_taps(gm_dtype dt, void *dinp, const void *dout,
                                                                        const int64_t ds[4], const int8_t *taps,
                                                                        const pool2d_geom *g, int64_t p) {
    const int64_t n = p / g->C, c = p % g->C, HW = g->H * g->W;
    const int64_t obase = n * ds[0] + c * ds[1];
    const int8_t *pt = taps + p * g->OH * g->OW;
    char *plane = (char *)dinp + p * HW * (int64_t)gm_dtype_size(dt);
    zero(plane, dt, HW);
    int64_t toh[128], tow[128]; /* each tap's row and column offsets in its window (pool_pos_of_tap, no division) */
    for (int64_t t = 0; t < g->kh * g->kw; t++) toh[t] = t / g->kw * g->dh, tow[t] = t % g->kw * g->dw;
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow++) {
            const int64_t t = pt[oh * g->OW + ow];
            if (t == -1) continue; /* an empty window */
            if (t < 0 || t >= g->kh * g->kw) return GM_ERR_ARG;
            const int64_t h = oh * g->sh - g->ph + toh[t], w = ow * g->sw - g->pw + tow[t];
            if (h < 0 || h >= g->H || w < 0 || w >= g->W) return GM_ERR_ARG;
            pool_add_at(dt, plane, h * g->W + w, pool_ld(dt, dout, obase + oh * ds[2] + ow * ds[3]));
        }
    return GM_OK;
}

int maxpool2d_backward_taps(void *dinp, const void *dout, const int64_t ds[4], const int8_t *taps, gm_dtype dt,
                            const pool2d_geom *g, int nthreads) {
    if (!pool_geom_ok(g) || !gm_dtype_is_float(dt) || g->kh * g->kw > 127) return GM_ERR_ARG;
    { /* as the forward */
        const int s = maxpool2x2_backward_taps(dinp, dout, ds, taps, dt, g, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    const int64_t planes = g->N * g->C;
    const int nt = pool_team(nthreads, planes, planes * (g->H * g->W + g->OH * g->OW));
    int status = GM_OK;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        int st = GM_OK;
        POOL_DISPATCH(dt, st = maxpool_plane_bwd_taps(DT, dinp, dout, ds, taps, g, p));
        if (st != GM_OK) {
#pragma omp atomic write
            status = st;
        }
    }
    return status;
}

/* ---- average --------------------------------------------------------------------------------------------- */

static inline __attribute__((always_inline)) void avgpool_row(gm_dtype dt, void *out, const void *inp,
                                                              const int64_t in[4], const pool2d_geom *g, int cip,
                                                              int64_t dov, int64_t r) {
    const int64_t oh = r % g->OH, nc = r / g->OH, n = nc / g->C, c = nc % g->C;
    const int64_t base = n * in[0] + c * in[1];
    for (int64_t ow = 0; ow < g->OW; ow++) {
        int64_t h0, h1, w0, w1;
        double div, sum = 0.0;
        pool_avg_window(g, oh, ow, cip, dov, &h0, &h1, &w0, &w1, &div);
        if (h0 >= h1 || w0 >= w1) { /* entirely in the padding: PyTorch writes 0 */
            pool_st(dt, out, r * g->OW + ow, 0.0);
            continue;
        }
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) sum += pool_ld(dt, inp, base + h * in[2] + w * in[3]);
        pool_st(dt, out, r * g->OW + ow, sum / div);
    }
}

int avgpool2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt, const pool2d_geom *g,
                      int count_include_pad, int64_t divisor_override, int nthreads) {
    if (!pool_geom_ok(g) || g->dh != 1 || g->dw != 1 || divisor_override < 0 || !gm_dtype_is_float(dt))
        return GM_ERR_ARG;
    const int64_t rows = g->N * g->C * g->OH;
    const int nt = pool_team(nthreads, rows, rows * g->OW * g->kh * g->kw);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++)
        POOL_DISPATCH(dt, avgpool_row(DT, out, inp, in, g, count_include_pad, divisor_override, r));
    return GM_OK;
}

static inline __attribute__((always_inline)) void avgpool_plane_bwd(gm_dtype dt, void *dinp, const void *dout,
                                                                    const int64_t ds[4], const pool2d_geom *g,
                                                                    int cip, int64_t dov, int64_t p) {
    const int64_t n = p / g->C, c = p % g->C, HW = g->H * g->W;
    const int64_t obase = n * ds[0] + c * ds[1];
    char *plane = (char *)dinp + p * HW * (int64_t)gm_dtype_size(dt);
    zero(plane, dt, HW);
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow++) {
            int64_t h0, h1, w0, w1;
            double div;
            pool_avg_window(g, oh, ow, cip, dov, &h0, &h1, &w0, &w1, &div);
            const double v = pool_ld(dt, dout, obase + oh * ds[2] + ow * ds[3]) / div;
            for (int64_t h = h0; h < h1; h++)
                for (int64_t w = w0; w < w1; w++) pool_add_at(dt, plane, h * g->W + w, v);
        }
}

int avgpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt, const pool2d_geom *g,
                       int count_include_pad, int64_t divisor_override, int nthreads) {
    if (!pool_geom_ok(g) || g->dh != 1 || g->dw != 1 || divisor_override < 0 || !gm_dtype_is_float(dt))
        return GM_ERR_ARG;
    const int64_t planes = g->N * g->C;
    const int nt = pool_team(nthreads, planes, planes * (g->H * g->W + g->OH * g->OW * g->kh * g->kw));
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t p = 0; p < planes; p++)
        POOL_DISPATCH(dt, avgpool_plane_bwd(DT, dinp, dout, ds, g, count_include_pad, divisor_override, p));
    return GM_OK;
}

/* ---- adaptive average ------------------------------------------------------------------------------------- */

static inline __attribute__((always_inline)) void adaptive_row(gm_dtype dt, void *out, const void *inp,
                                                               const int64_t in[4], const pool2d_geom *g,
                                                               int64_t r) {
    const int64_t oh = r % g->OH, nc = r / g->OH, n = nc / g->C, c = nc % g->C;
    const int64_t base = n * in[0] + c * in[1];
    const int64_t h0 = pool_start_index(oh, g->OH, g->H), h1 = pool_end_index(oh, g->OH, g->H);
    for (int64_t ow = 0; ow < g->OW; ow++) {
        const int64_t w0 = pool_start_index(ow, g->OW, g->W), w1 = pool_end_index(ow, g->OW, g->W);
        double sum = 0.0;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) sum += pool_ld(dt, inp, base + h * in[2] + w * in[3]);
        pool_st(dt, out, r * g->OW + ow, sum / (double)((h1 - h0) * (w1 - w0)));
    }
}

int adaptive_avgpool2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt,
                               const pool2d_geom *g, int nthreads) {
    if (!pool_adaptive_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    const int64_t rows = g->N * g->C * g->OH;
    /* every output reads about (H/OH + 1) x (W/OW + 1) inputs */
    const int64_t work = g->N * g->C * (g->H + g->OH) * (g->W + g->OW);
    const int nt = pool_team(nthreads, rows, work);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++) POOL_DISPATCH(dt, adaptive_row(DT, out, inp, in, g, r));
    return GM_OK;
}

/* One output of adaptive_maxpool2d_forward (flat index i): window_argmax's rule over an adaptive window. */
static inline __attribute__((always_inline)) void adaptive_max_one(gm_dtype dt, void *out, int64_t *ind,
                                                                   const void *inp, const int64_t in[4],
                                                                   const pool2d_geom *g, int64_t i) {
    const int64_t ow = i % g->OW, oh = (i / g->OW) % g->OH, nc = i / (g->OW * g->OH), n = nc / g->C, c = nc % g->C;
    const int64_t h0 = pool_start_index(oh, g->OH, g->H), h1 = pool_end_index(oh, g->OH, g->H);
    const int64_t w0 = pool_start_index(ow, g->OW, g->W), w1 = pool_end_index(ow, g->OW, g->W);
    double best = -INFINITY;
    int64_t arg = -1;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) {
            const double v = pool_ld(dt, inp, n * in[0] + c * in[1] + h * in[2] + w * in[3]);
            if (v > best || v != v) best = v, arg = h * g->W + w;
        }
    pool_st(dt, out, i, best);
    ind[i] = arg;
}

int adaptive_maxpool2d_forward(void *out, int64_t *indices, const void *inp, const int64_t in[4], gm_dtype dt,
                               const pool2d_geom *g, int nthreads) {
    if (!pool_adaptive_ok(g) || !gm_dtype_is_float(dt) || !indices) return GM_ERR_ARG;
    const int64_t total = g->N * g->C * g->OH * g->OW;
    const int nt = pool_team(nthreads, total, g->N * g->C * (g->H + g->OH) * (g->W + g->OW));
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < total; i++) POOL_DISPATCH(dt, adaptive_max_one(DT, out, indices, inp, in, g, i));
    return GM_OK;
}

static inline __attribute__((always_inline)) void adaptive_plane_bwd(gm_dtype dt, void *dinp, const void *dout,
                                                                     const int64_t ds[4], const pool2d_geom *g,
                                                                     int64_t p) {
    const int64_t n = p / g->C, c = p % g->C, HW = g->H * g->W;
    const int64_t obase = n * ds[0] + c * ds[1];
    char *plane = (char *)dinp + p * HW * (int64_t)gm_dtype_size(dt);
    zero(plane, dt, HW);
    for (int64_t oh = 0; oh < g->OH; oh++) {
        const int64_t h0 = pool_start_index(oh, g->OH, g->H), h1 = pool_end_index(oh, g->OH, g->H);
        for (int64_t ow = 0; ow < g->OW; ow++) {
            const int64_t w0 = pool_start_index(ow, g->OW, g->W), w1 = pool_end_index(ow, g->OW, g->W);
            const double v = pool_ld(dt, dout, obase + oh * ds[2] + ow * ds[3]) / (double)((h1 - h0) * (w1 - w0));
            for (int64_t h = h0; h < h1; h++)
                for (int64_t w = w0; w < w1; w++) pool_add_at(dt, plane, h * g->W + w, v);
        }
    }
}

int adaptive_avgpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt,
                                const pool2d_geom *g, int nthreads) {
    if (!pool_adaptive_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    const int64_t planes = g->N * g->C;
    const int nt = pool_team(nthreads, planes, planes * (g->H + g->OH) * (g->W + g->OW));
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t p = 0; p < planes; p++) POOL_DISPATCH(dt, adaptive_plane_bwd(DT, dinp, dout, ds, g, p));
    return GM_OK;
}
