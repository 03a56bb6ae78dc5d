/* kernels/pool_window.h — the window arithmetic of pooling, shared by kernels/cpu/pool.c and kernels/cuda/pool.cu
 * (kernels/README.md): which input elements each output's window reads, and the average's divisor. PyTorch's
 * arithmetic (aten/src/ATen/native/cpu/MaxPoolKernel.cpp, AvgPoolKernel.cpp, AdaptiveAvgPoolKernel.cpp), so
 * sizes, tie-breaking and divisors match.
 *
 * Why one header for both backends: the CUDA kernels promise results bit-identical to the CPU's, which holds only
 * while both read the same taps in the same order. Written once, as inline functions that gcc compiles for the
 * host and nvcc also for the device (those marked GM_HD, kernels/common.h), as resize_taps.h does. Not part of
 * the interface (kernels/cpu/pool.h and kernels/cuda/pool.h are). */
#ifndef GM_KERNELS_POOL_WINDOW_H
#define GM_KERNELS_POOL_WINDOW_H

#include "pool_geom.h"

static inline int pool_geom_ok(const pool2d_geom *g) {
    return g->N >= 0 && g->C >= 0 && g->H >= 0 && g->W >= 0 && g->OH >= 0 && g->OW >= 0 && g->kh > 0 &&
           g->kw > 0 && g->sh > 0 && g->sw > 0 && g->ph >= 0 && g->pw >= 0 && g->dh > 0 && g->dw > 0;
}

/* Adaptive pooling reads only N, C, H, W, OH, OW. */
static inline int pool_adaptive_ok(const pool2d_geom *g) {
    return g->N >= 0 && g->C >= 0 && g->H > 0 && g->W > 0 && g->OH >= 0 && g->OW >= 0;
}

GM_HD static inline int64_t pool_imin(int64_t a, int64_t b) { return a < b ? a : b; }
GM_HD static inline int64_t pool_imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- max ------------------------------------------------------------------------------------------------ */

/* Taps of a window along one axis: first, first + step, ... below end (first >= 0 already). The division is
 * skipped for step 1, the usual case: it is the costliest instruction of a small window. */
GM_HD static inline int64_t pool_ntaps(int64_t first, int64_t end, int64_t step) {
    if (first >= end) return 0;
    return step == 1 ? end - first : (end - first + step - 1) / step;
}

/* The taps of output o's window along one axis: the first inside [0, size) and how many there are. */
GM_HD static inline void pool_max_taps(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t dil, int64_t size,
                                       int64_t *first, int64_t *count) {
    int64_t a = o * stride - pad;
    const int64_t end = pool_imin(a + (k - 1) * dil + 1, size);
    while (a < 0) a += dil;
    *first = a;
    *count = pool_ntaps(a, end, dil);
}

/* Max pooling's compact saved form (kernels/cpu/pool.h maxpool2d_forward_taps): the argmax of output (oh, ow) as
 * its tap in the window, i * kw + j for the element at row oh*sh - ph + i*dh, column ow*sw - pw + j*dw, or -1
 * for an empty window; and back from a tap to the flat position h*W + w (-1 when it lies outside the plane). */
GM_HD static inline int64_t pool_tap_of(const pool2d_geom *g, int64_t oh, int64_t ow, int64_t pos) {
    if (pos < 0) return -1;
    const int64_t h = pos / g->W, w = pos - h * g->W;
    return (h - (oh * g->sh - g->ph)) / g->dh * g->kw + (w - (ow * g->sw - g->pw)) / g->dw;
}

GM_HD static inline int64_t pool_pos_of_tap(const pool2d_geom *g, int64_t oh, int64_t ow, int64_t tap) {
    if (tap < 0 || tap >= g->kh * g->kw) return -1;
    const int64_t h = oh * g->sh - g->ph + tap / g->kw * g->dh, w = ow * g->sw - g->pw + tap % g->kw * g->dw;
    return h < 0 || h >= g->H || w < 0 || w >= g->W ? -1 : h * g->W + w;
}

/* ---- average --------------------------------------------------------------------------------------------- */

/* Output (oh, ow)'s window clipped to the input, [*h0, *h1) x [*w0, *w1), and its divisor: dov when > 0, else
 * the window's size clipped to the padded input (cip, count_include_pad) or to the input. */
GM_HD static inline void pool_avg_window(const pool2d_geom *g, int64_t oh, int64_t ow, int cip, int64_t dov,
                                         int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1, double *div) {
    int64_t a0 = oh * g->sh - g->ph, b0 = ow * g->sw - g->pw;
    int64_t a1 = pool_imin(a0 + g->kh, g->H + g->ph), b1 = pool_imin(b0 + g->kw, g->W + g->pw);
    const int64_t padded = (a1 - a0) * (b1 - b0);
    a0 = pool_imax(a0, 0);
    b0 = pool_imax(b0, 0);
    a1 = pool_imin(a1, g->H);
    b1 = pool_imin(b1, g->W);
    *h0 = a0, *h1 = a1, *w0 = b0, *w1 = b1;
    *div = (double)(dov > 0 ? dov : cip ? padded : (a1 - a0) * (b1 - b0));
}

/* ---- adaptive average ------------------------------------------------------------------------------------- */

/* floor(a * c / b) and ceil((a + 1) * c / b), PyTorch's start_index / end_index (sizes are far below 2^31, so
 * the products cannot overflow): output a of b reads [start, end) of c inputs. */
GM_HD static inline int64_t pool_start_index(int64_t a, int64_t b, int64_t c) {
    return (a / b) * c + ((a % b) * c) / b;
}
GM_HD static inline int64_t pool_end_index(int64_t a, int64_t b, int64_t c) { return 1 + ((a + 1) * c - 1) / b; }

#endif
