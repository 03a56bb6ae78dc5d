/* kernels/cuda/pool.cu — max / average / adaptive-average 2-D pooling on CUDA, forward and backward (pool.h).
 *
 * Forward: one thread per output element (grid-stride), the window walked exactly as kernels/cpu/pool.c walks
 * it (same taps, same order, sums in double), so results are bit-identical to the CPU's.
 * Backward: one thread per input element gathers the outputs whose window covers it, in the order the CPU's
 * scatter visits them (output rows, then columns), rounding to the dtype after each addition as the CPU's
 * `plane[i] += v` does: bit-identical, deterministic, and no atomics or zero-fill pass; each input gradient
 * element is written once, coalesced. For the usual windows (kernel <= 2 * stride) an input has at most four
 * covering outputs.
 *
 * The flat index of a thread is split into (n, c, y, x) with 32-bit divisions when the tensor has fewer than
 * 2^31 elements (template parameter I), 64-bit otherwise. */
#include "pool.h"
#include "../pool_window.h"
#include "pool_common.cuh"

#include <math.h>

/* ---- max ------------------------------------------------------------------------------------------------ */
/* The argmax of output (oh, ow)'s window in plane `base` of inp (its flat h*W + w, -1 for an empty window) and
 * the max in *best: kernels/cpu/pool.c's window_argmax, the same taps in the same order. The first maximum
 * wins; a NaN always wins (the last one). The forward's indices and the backward without them both use it. */
template <int DT>
__device__ __forceinline__ int64_t window_argmax(const void *inp, const gm_pl_st4 &in, const pool2d_geom &g,
                                                 int64_t base, int64_t oh, int64_t ow, double *best_out) {
    int64_t h0, nh, w0, nw;
    pool_max_taps(oh, g.sh, g.ph, g.kh, g.dh, g.H, &h0, &nh);
    pool_max_taps(ow, g.sw, g.pw, g.kw, g.dw, g.W, &w0, &nw);
    const int64_t step_h = g.dh * in.s[2], step_w = g.dw * in.s[3];
    double best = -INFINITY;
    int64_t arg = -1, row = base + h0 * in.s[2] + w0 * in.s[3], pos_row = h0 * g.W + w0;
    for (int64_t a = 0; a < nh; a++, row += step_h, pos_row += g.dh * g.W) {
        int64_t q = row, pos = pos_row;
        for (int64_t b = 0; b < nw; b++, q += step_w, pos += g.dw) {
            const double v = gm_pl_ld<DT>(inp, q);
            if (v > best || v != v) {
                best = v;
                arg = pos;
            }
        }
    }
    *best_out = best;
    return arg;
}

template <int DT, typename I>
__global__ void maxpool_fwd(void *out, int64_t *ind, const void *inp, gm_pl_st4 in, pool2d_geom g, int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [n, c, oh, ow] = gm_pl_split<I>(i, g.C, g.OH, g.OW);
        const int64_t base = (int64_t)n * in.s[0] + (int64_t)c * in.s[1];
        double best = -INFINITY;
        if (ind) {
            ind[i] = window_argmax<DT>(inp, in, g, base, oh, ow, &best);
            gm_pl_st<DT>(out, i, best);
            continue;
        }
        /* values only: a NaN anywhere makes the result NaN */
        int64_t h0, nh, w0, nw;
        pool_max_taps(oh, g.sh, g.ph, g.kh, g.dh, g.H, &h0, &nh);
        pool_max_taps(ow, g.sw, g.pw, g.kw, g.dw, g.W, &w0, &nw);
        int64_t row = base + h0 * in.s[2] + w0 * in.s[3];
        int nan = 0;
        for (int64_t a = 0; a < nh; a++, row += g.dh * in.s[2]) {
            int64_t q = row;
            for (int64_t b = 0; b < nw; b++, q += g.dw * in.s[3]) {
                const double v = gm_pl_ld<DT>(inp, q);
                best = v > best ? v : best;
                nan |= v != v;
            }
        }
        gm_pl_st<DT>(out, i, nan ? (double)NAN : best);
    }
}

/* [*lo, *hi]: the outputs along one axis whose max-pool window has a tap at input position x. */
__host__ __device__ __forceinline__ void covering(int64_t x, int64_t stride, int64_t pad, int64_t k, int64_t dil,
                                                  int64_t nout, int64_t *lo, int64_t *hi) {
    /* o covers x when 0 <= x + pad - o * stride <= (k - 1) * dil */
    *lo = gm_cu_max<int64_t>(0, -gm_pl_floor_div(-(x + pad - (k - 1) * dil), stride));
    *hi = gm_cu_min<int64_t>(nout - 1, gm_pl_floor_div(x + pad, stride));
}

/* With ind NULL, each covering window's argmax is found again in inp (cuda_maxpool2d_backward_input). */
template <int DT, typename I>
__global__ void maxpool_bwd(void *dinp, const void *dout, gm_pl_st4 ds, const int64_t *ind, const void *inp,
                            gm_pl_st4 in, pool2d_geom g, int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [n, c, h, w] = gm_pl_split<I>(i, g.C, g.H, g.W);
        int64_t oh0, oh1, ow0, ow1;
        covering(h, g.sh, g.ph, g.kh, g.dh, g.OH, &oh0, &oh1);
        covering(w, g.sw, g.pw, g.kw, g.dw, g.OW, &ow0, &ow1);
        const int64_t pos = (int64_t)h * g.W + w, obase = (int64_t)n * ds.s[0] + (int64_t)c * ds.s[1];
        const int64_t *pi = ind ? ind + ((int64_t)n * g.C + c) * g.OH * g.OW : NULL;
        const int64_t ibase = (int64_t)n * in.s[0] + (int64_t)c * in.s[1];
        double acc = 0.0, best;
        for (int64_t oh = oh0; oh <= oh1; oh++) {
            if ((h + g.ph - oh * g.sh) % g.dh) continue;
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                if ((w + g.pw - ow * g.sw) % g.dw) continue;
                if ((pi ? pi[oh * g.OW + ow] : window_argmax<DT>(inp, in, g, ibase, oh, ow, &best)) == pos)
                    acc = gm_pl_round<DT>(acc + gm_pl_ld<DT>(dout, obase + oh * ds.s[2] + ow * ds.s[3]));
            }
        }
        gm_pl_st<DT>(dinp, i, acc);
    }
}

/* The window is unknown (the caller passed only the indices): each thread owns one (n, c) plane and scatters
 * its outputs' gradients in order, exactly the CPU's loop, into a plane zeroed beforehand (cudaMemsetAsync).
 * Indices outside [0, H*W) are skipped (-1 marks an empty window). Fine for global max pooling (one output per
 * plane); for sliding windows pass the window, which allows the gather above. */
template <int DT, typename I>
__global__ void maxpool_bwd_planes(void *dinp, const void *dout, gm_pl_st4 ds, const int64_t *ind, pool2d_geom g,
                                   int64_t total) {
    typedef typename gm_cu_type<DT>::st S;
    GM_CU_GRID_STRIDE(p, total) {
        const I pp = (I)p, C = (I)g.C;
        const I n = pp / C, c = pp - n * C;
        const int64_t HW = g.H * g.W, obase = (int64_t)n * ds.s[0] + (int64_t)c * ds.s[1];
        const int64_t *pi = ind + p * g.OH * g.OW;
        S *plane = (S *)dinp + p * HW;
        for (int64_t oh = 0; oh < g.OH; oh++)
            for (int64_t ow = 0; ow < g.OW; ow++) {
                const int64_t k = pi[oh * g.OW + ow];
                if (k < 0 || k >= HW) continue;
                const double v = gm_pl_ld<DT>(dout, obase + oh * ds.s[2] + ow * ds.s[3]);
                gm_pl_st<DT>(plane, k, gm_pl_ld<DT>(plane, k) + v);
            }
    }
}

/* ---- max, the argmax saved as its tap in the window (kernels/cpu/pool.h maxpool2d_forward_taps) ---------- */
template <int DT, typename I>
__global__ void maxpool_fwd_taps(void *out, int8_t *taps, const void *inp, gm_pl_st4 in, pool2d_geom g,
                                 int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [n, c, oh, ow] = gm_pl_split<I>(i, g.C, g.OH, g.OW);
        const int64_t base = (int64_t)n * in.s[0] + (int64_t)c * in.s[1];
        double best;
        const int64_t pos = window_argmax<DT>(inp, in, g, base, oh, ow, &best);
        taps[i] = (int8_t)pool_tap_of(&g, oh, ow, pos);
        gm_pl_st<DT>(out, i, best);
    }
}

/* maxpool_bwd's gather, an output's tap compared with the input element's tap in that output's window. */
template <int DT, typename I>
__global__ void maxpool_bwd_taps(void *dinp, const void *dout, gm_pl_st4 ds, const int8_t *taps, pool2d_geom g,
                                 int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [n, c, h, w] = gm_pl_split<I>(i, g.C, g.H, g.W);
        int64_t oh0, oh1, ow0, ow1;
        covering(h, g.sh, g.ph, g.kh, g.dh, g.OH, &oh0, &oh1);
        covering(w, g.sw, g.pw, g.kw, g.dw, g.OW, &ow0, &ow1);
        const int64_t obase = (int64_t)n * ds.s[0] + (int64_t)c * ds.s[1];
        const int8_t *pt = taps + ((int64_t)n * g.C + c) * g.OH * g.OW;
        double acc = 0.0;
        for (int64_t oh = oh0; oh <= oh1; oh++) {
            const int64_t a = h + g.ph - oh * g.sh;
            if (a % g.dh) continue;
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                const int64_t b = w + g.pw - ow * g.sw;
                if (b % g.dw) continue;
                if (pt[oh * g.OW + ow] == a / g.dh * g.kw + b / g.dw)
                    acc = gm_pl_round<DT>(acc + gm_pl_ld<DT>(dout, obase + oh * ds.s[2] + ow * ds.s[3]));
            }
        }
        gm_pl_st<DT>(dinp, i, acc);
    }
}

/* ---- average --------------------------------------------------------------------------------------------- */
template <int DT, typename I>
__global__ void avgpool_fwd(void *out, const void *inp, gm_pl_st4 in, pool2d_geom g, int cip, int64_t dov,
                            int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [n, c, oh, ow] = gm_pl_split<I>(i, g.C, g.OH, g.OW);
        const int64_t base = (int64_t)n * in.s[0] + (int64_t)c * in.s[1];
        int64_t h0, h1, w0, w1;
        double div, sum = 0.0;
        pool_avg_window(&g, oh, ow, cip, dov, &h0, &h1, &w0, &w1, &div);
        if (h0 >= h1 || w0 >= w1) { /* entirely in the padding: 0, as PyTorch */
            gm_pl_st<DT>(out, i, 0.0);
            continue;
        }
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) sum += gm_pl_ld<DT>(inp, base + h * in.s[2] + w * in.s[3]);
        gm_pl_st<DT>(out, i, sum / div);
    }
}

template <int DT, typename I>
__global__ void avgpool_bwd(void *dinp, const void *dout, gm_pl_st4 ds, pool2d_geom g, int cip, int64_t dov,
                            int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [n, c, h, w] = gm_pl_split<I>(i, g.C, g.H, g.W);
        /* output o's window (before clipping) is [o * stride - pad, + k): it covers x for these o */
        const int64_t oh0 = gm_cu_max<int64_t>(0, -gm_pl_floor_div(-(h + g.ph - g.kh + 1), g.sh));
        const int64_t oh1 = gm_cu_min<int64_t>(g.OH - 1, gm_pl_floor_div(h + g.ph, g.sh));
        const int64_t ow0 = gm_cu_max<int64_t>(0, -gm_pl_floor_div(-(w + g.pw - g.kw + 1), g.sw));
        const int64_t ow1 = gm_cu_min<int64_t>(g.OW - 1, gm_pl_floor_div(w + g.pw, g.sw));
        const int64_t obase = (int64_t)n * ds.s[0] + (int64_t)c * ds.s[1];
        double acc = 0.0;
        for (int64_t oh = oh0; oh <= oh1; oh++)
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                int64_t a0, a1, b0, b1;
                double div;
                pool_avg_window(&g, oh, ow, cip, dov, &a0, &a1, &b0, &b1, &div);
                if (h < a0 || h >= a1 || w < b0 || w >= b1) continue;
                acc = gm_pl_round<DT>(acc + gm_pl_ld<DT>(dout, obase + oh * ds.s[2] + ow * ds.s[3]) / div);
            }
        gm_pl_st<DT>(dinp, i, acc);
    }
}

/* ---- adaptive average ------------------------------------------------------------------------------------- */
template <int DT, typename I>
__global__ void adaptive_fwd(void *out, const void *inp, gm_pl_st4 in, pool2d_geom g, int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [n, c, oh, ow] = gm_pl_split<I>(i, g.C, g.OH, g.OW);
        const int64_t base = (int64_t)n * in.s[0] + (int64_t)c * in.s[1];
        const int64_t h0 = pool_start_index(oh, g.OH, g.H), h1 = pool_end_index(oh, g.OH, g.H);
        const int64_t w0 = pool_start_index(ow, g.OW, g.W), w1 = pool_end_index(ow, g.OW, g.W);
        double sum = 0.0;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) sum += gm_pl_ld<DT>(inp, base + h * in.s[2] + w * in.s[3]);
        gm_pl_st<DT>(out, i, sum / (double)((h1 - h0) * (w1 - w0)));
    }
}

/* [*lo, *hi]: the adaptive windows along one axis (n outputs over `size` inputs) that contain x. Window o
 * contains x iff start(o) <= x < end(o), which bounds o by floor(x*n/size) and ceil((x+1)*n/size) - 1. */
__host__ __device__ __forceinline__ void adaptive_covering(int64_t x, int64_t n, int64_t size, int64_t *lo,
                                                           int64_t *hi) {
    *lo = x * n / size;
    *hi = gm_cu_min<int64_t>(n - 1, ((x + 1) * n + size - 1) / size - 1);
}

template <int DT, typename I>
__global__ void adaptive_bwd(void *dinp, const void *dout, gm_pl_st4 ds, pool2d_geom g, int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [n, c, h, w] = gm_pl_split<I>(i, g.C, g.H, g.W);
        int64_t oh0, oh1, ow0, ow1;
        adaptive_covering(h, g.OH, g.H, &oh0, &oh1);
        adaptive_covering(w, g.OW, g.W, &ow0, &ow1);
        const int64_t obase = (int64_t)n * ds.s[0] + (int64_t)c * ds.s[1];
        double acc = 0.0;
        for (int64_t oh = oh0; oh <= oh1; oh++) {
            const int64_t a0 = pool_start_index(oh, g.OH, g.H), a1 = pool_end_index(oh, g.OH, g.H);
            if (h < a0 || h >= a1) continue;
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                const int64_t b0 = pool_start_index(ow, g.OW, g.W), b1 = pool_end_index(ow, g.OW, g.W);
                if (w < b0 || w >= b1) continue;
                const double div = (double)((a1 - a0) * (b1 - b0));
                const double v = gm_pl_ld<DT>(dout, obase + oh * ds.s[2] + ow * ds.s[3]) / div;
                acc = gm_pl_round<DT>(acc + v);
            }
        }
        gm_pl_st<DT>(dinp, i, acc);
    }
}

/* ---- adaptive max: kernels/cpu/pool.c's adaptive_max_one, the same taps in the same order ----------------- */
template <int DT, typename I>
__global__ void adaptive_max_fwd(void *out, int64_t *ind, const void *inp, gm_pl_st4 in, pool2d_geom g,
                                 int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [n, c, oh, ow] = gm_pl_split<I>(i, g.C, g.OH, g.OW);
        const int64_t h0 = pool_start_index(oh, g.OH, g.H), h1 = pool_end_index(oh, g.OH, g.H);
        const int64_t w0 = pool_start_index(ow, g.OW, g.W), w1 = pool_end_index(ow, g.OW, g.W);
        const int64_t base = (int64_t)n * in.s[0] + (int64_t)c * in.s[1];
        double best = -INFINITY;
        int64_t arg = -1;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) {
                const double v = gm_pl_ld<DT>(inp, base + h * in.s[2] + w * in.s[3]);
                if (v > best || v != v) best = v, arg = h * g.W + w;
            }
        gm_pl_st<DT>(out, i, best);
        ind[i] = arg;
    }
}

/* ---- entry points ------------------------------------------------------------------------------------------ */
extern "C" int cuda_maxpool2d_forward(void *out, int64_t *indices, const void *inp, const int64_t in[4],
                                      gm_dtype dt, const pool2d_geom *g, gm_cuda_ctx *ctx) {
    if (!g || !pool_geom_ok(g)) return GM_ERR_ARG;
    GM_PL_LAUNCH_AND_RETURN(maxpool_fwd, dt, g->N * g->C * g->OH * g->OW, ctx, out, indices, inp, gm_pl_st4_of(in),
                            *g);
}

/* What both backward entry points launch: the gather (g->kh > 0; from ind, or with ind NULL from the argmax found
 * again in inp) or the plane-wise scatter of a window-less call (g->kh == 0). */
static int launch_maxpool_bwd(void *dinp, const void *dout, const int64_t ds[4], const int64_t *ind,
                              const void *inp, gm_pl_st4 in, gm_dtype dt, const pool2d_geom *g, gm_cuda_ctx *ctx) {
    const gm_pl_st4 s = gm_pl_st4_of(ds);
    if (g->kh > 0)
        GM_PL_LAUNCH_AND_RETURN(maxpool_bwd, dt, g->N * g->C * g->H * g->W, ctx, dinp, dout, s, ind, inp, in, *g);
    GM_PL_LAUNCH_AND_RETURN(maxpool_bwd_planes, dt, g->N * g->C, ctx, dinp, dout, s, ind, *g);
}

extern "C" int cuda_maxpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], const int64_t *indices,
                                       gm_dtype dt, const pool2d_geom *g, gm_cuda_ctx *ctx) {
    if (!g || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    pool2d_geom k = *g;
    const int window = k.kh > 0 || k.kw > 0;
    if (!window) k.kh = k.kw = 1; /* for the checks only */
    if (!pool_geom_ok(&k)) return GM_ERR_ARG;
    if (!window) {
        k.kh = 0;
        const size_t nbytes = (size_t)(k.N * k.C * k.H * k.W) * gm_dtype_size(dt);
        if (nbytes) GM_CU_CHECK(ctx, cudaMemsetAsync(dinp, 0, nbytes, (cudaStream_t)ctx->stream));
    }
    const gm_pl_st4 none = {{0, 0, 0, 0}};
    return launch_maxpool_bwd(dinp, dout, ds, indices, NULL, none, dt, &k, ctx);
}

extern "C" int cuda_maxpool2d_backward_input(void *dinp, const void *dout, const int64_t ds[4], const void *inp,
                                             const int64_t in[4], gm_dtype dt, const pool2d_geom *g,
                                             gm_cuda_ctx *ctx) {
    if (!g || !pool_geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    return launch_maxpool_bwd(dinp, dout, ds, NULL, inp, gm_pl_st4_of(in), dt, g, ctx);
}

extern "C" int cuda_maxpool2d_forward_taps(void *out, int8_t *taps, const void *inp, const int64_t in[4],
                                           gm_dtype dt, const pool2d_geom *g, gm_cuda_ctx *ctx) {
    if (!g || !pool_geom_ok(g) || g->kh * g->kw > 127 || !taps) return GM_ERR_ARG;
    GM_PL_LAUNCH_AND_RETURN(maxpool_fwd_taps, dt, g->N * g->C * g->OH * g->OW, ctx, out, taps, inp,
                            gm_pl_st4_of(in), *g);
}

extern "C" int cuda_maxpool2d_backward_taps(void *dinp, const void *dout, const int64_t ds[4], const int8_t *taps,
                                            gm_dtype dt, const pool2d_geom *g, gm_cuda_ctx *ctx) {
    if (!g || !pool_geom_ok(g) || g->kh * g->kw > 127) return GM_ERR_ARG;
    GM_PL_LAUNCH_AND_RETURN(maxpool_bwd_taps, dt, g->N * g->C * g->H * g->W, ctx, dinp, dout, gm_pl_st4_of(ds), taps,
                            *g);
}

extern "C" int cuda_avgpool2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt,
                                      const pool2d_geom *g, int count_include_pad, int64_t divisor_override,
                                      gm_cuda_ctx *ctx) {
    if (!g || !pool_geom_ok(g) || g->dh != 1 || g->dw != 1 || divisor_override < 0) return GM_ERR_ARG;
    GM_PL_LAUNCH_AND_RETURN(avgpool_fwd, dt, g->N * g->C * g->OH * g->OW, ctx, out, inp, gm_pl_st4_of(in), *g,
                            count_include_pad, divisor_override);
}

extern "C" int cuda_avgpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt,
                                       const pool2d_geom *g, int count_include_pad, int64_t divisor_override,
                                       gm_cuda_ctx *ctx) {
    if (!g || !pool_geom_ok(g) || g->dh != 1 || g->dw != 1 || divisor_override < 0) return GM_ERR_ARG;
    GM_PL_LAUNCH_AND_RETURN(avgpool_bwd, dt, g->N * g->C * g->H * g->W, ctx, dinp, dout, gm_pl_st4_of(ds), *g,
                            count_include_pad, divisor_override);
}

extern "C" int cuda_adaptive_avgpool2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt,
                                               const pool2d_geom *g, gm_cuda_ctx *ctx) {
    if (!g || !pool_adaptive_ok(g)) return GM_ERR_ARG;
    GM_PL_LAUNCH_AND_RETURN(adaptive_fwd, dt, g->N * g->C * g->OH * g->OW, ctx, out, inp, gm_pl_st4_of(in), *g);
}

extern "C" int cuda_adaptive_avgpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt,
                                                const pool2d_geom *g, gm_cuda_ctx *ctx) {
    if (!g || !pool_adaptive_ok(g)) return GM_ERR_ARG;
    /* every output has a non-empty window, so OH or OW 0 means no output: the gradient is 0 */
    GM_PL_LAUNCH_AND_RETURN(adaptive_bwd, dt, g->N * g->C * g->H * g->W, ctx, dinp, dout, gm_pl_st4_of(ds), *g);
}

extern "C" int cuda_adaptive_maxpool2d_forward(void *out, int64_t *indices, const void *inp, const int64_t in[4],
                                               gm_dtype dt, const pool2d_geom *g, gm_cuda_ctx *ctx) {
    if (!g || !pool_adaptive_ok(g) || !indices) return GM_ERR_ARG;
    GM_PL_LAUNCH_AND_RETURN(adaptive_max_fwd, dt, g->N * g->C * g->OH * g->OW, ctx, out, indices, inp,
                            gm_pl_st4_of(in), *g);
}
