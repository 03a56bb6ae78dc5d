/* kernels/cuda/resize.cu — nearest / nearest-exact / bilinear resizing on CUDA, forward and backward (resize.h).
 *
 * Forward: one thread per output element; its row and column taps come from resize_axis_tap, the code the CPU
 * runs too (kernels/resize_taps.h: PyTorch's source-index formulas in PyTorch's precision), so the same source
 * pixels and weights come out, and the bilinear blend is the CPU's expression in double with every product
 * rounded before it is added (resize_mul: nvcc would otherwise fuse them into fma).
 * Backward: one thread per input element. The taps are monotone in the output index, so the outputs reading
 * input row h form one range [lo, hi] (two binary searches), likewise for columns. The thread adds their
 * contributions in the CPU scatter's order — column blocks of RESIZE_COLS, then output rows, then columns, then
 * the four corners — rounding after each addition: bit-identical to the CPU, deterministic, no atomics. */
#include "resize.h"
#include "../resize_taps.h"
#include "pool_common.cuh"

/* Must equal RESIZE_COLS in kernels/cpu/resize.c: the CPU backward walks output columns in blocks of this many,
 * and the order of additions decides the rounding. */
#define GM_RESIZE_CPU_COLS 256

template <int DT, typename I>
__global__ void resize_fwd(void *out, const void *inp, gm_pl_st4 in, resize2d_geom g, resize_axis ah, resize_axis aw,
                           int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [b, c, oh, ow] = gm_pl_split<I>(i, g.C, g.OH, g.OW);
        const resize_tap th = resize_axis_tap(&ah, oh), tw = resize_axis_tap(&aw, ow);
        const int64_t base = (int64_t)b * in.s[0] + (int64_t)c * in.s[1];
        const int64_t r0 = base + th.i0 * in.s[2], r1 = base + th.i1 * in.s[2];
        const int64_t x0 = tw.i0 * in.s[3], x1 = tw.i1 * in.s[3];
        if (g.mode != RESIZE_BILINEAR) {
            gm_pl_st<DT>(out, i, gm_pl_ld<DT>(inp, r0 + x0));
            continue;
        }
        const double v00 = gm_pl_ld<DT>(inp, r0 + x0), v01 = gm_pl_ld<DT>(inp, r0 + x1);
        const double v10 = gm_pl_ld<DT>(inp, r1 + x0), v11 = gm_pl_ld<DT>(inp, r1 + x1);
        const double top = resize_mul(tw.l0, v00) + resize_mul(tw.l1, v01);
        const double bot = resize_mul(tw.l0, v10) + resize_mul(tw.l1, v11);
        gm_pl_st<DT>(out, i, resize_mul(th.l0, top) + resize_mul(th.l1, bot));
    }
}

/* [*lo, *hi]: the outputs o with i0(o) <= x <= i1(o), i.e. those that read input index x (empty: lo > hi). */
__host__ __device__ __forceinline__ void readers(const resize_axis &a, int64_t x, int64_t *lo, int64_t *hi) {
    int64_t l = 0, h = a.out; /* first o with i1(o) >= x */
    while (l < h) {
        const int64_t m = l + (h - l) / 2;
        if (resize_axis_tap(&a, m).i1 >= x) h = m;
        else l = m + 1;
    }
    *lo = l;
    l = 0, h = a.out; /* first o with i0(o) > x */
    while (l < h) {
        const int64_t m = l + (h - l) / 2;
        if (resize_axis_tap(&a, m).i0 > x) h = m;
        else l = m + 1;
    }
    *hi = l - 1;
}

template <int DT> __device__ __forceinline__ double corner(double acc, double lh, double lw, double v) {
    return gm_pl_round<DT>(acc + resize_mul(resize_mul(lh, lw), v));
}

template <int DT, typename I>
__global__ void resize_bwd(void *dinp, const void *dout, gm_pl_st4 ds, resize2d_geom g, resize_axis ah, resize_axis aw,
                           int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const auto [b, c, h, w] = gm_pl_split<I>(i, g.C, g.H, g.W);
        int64_t oh0, oh1, ow0, ow1;
        readers(ah, h, &oh0, &oh1);
        readers(aw, w, &ow0, &ow1);
        const int64_t obase = (int64_t)b * ds.s[0] + (int64_t)c * ds.s[1];
        const int bil = g.mode == RESIZE_BILINEAR;
        double acc = 0.0;
        if (ow0 <= ow1 && oh0 <= oh1) {
            for (int64_t c0 = ow0 / GM_RESIZE_CPU_COLS * GM_RESIZE_CPU_COLS; c0 <= ow1; c0 += GM_RESIZE_CPU_COLS) {
                const int64_t a = gm_cu_max<int64_t>(ow0, c0), e = gm_cu_min<int64_t>(ow1, c0 + GM_RESIZE_CPU_COLS - 1);
                for (int64_t oh = oh0; oh <= oh1; oh++) {
                    const resize_tap th = resize_axis_tap(&ah, oh);
                    for (int64_t ow = a; ow <= e; ow++) {
                        const resize_tap tw = resize_axis_tap(&aw, ow);
                        const double v = gm_pl_ld<DT>(dout, obase + oh * ds.s[2] + ow * ds.s[3]);
                        if (!bil) {
                            acc = gm_pl_round<DT>(acc + v);
                            continue;
                        }
                        /* the CPU's four corner additions, in its order, each weight (lh * lw) * v */
                        if (th.i0 == h && tw.i0 == w) acc = corner<DT>(acc, th.l0, tw.l0, v);
                        if (th.i0 == h && tw.i1 == w) acc = corner<DT>(acc, th.l0, tw.l1, v);
                        if (th.i1 == h && tw.i0 == w) acc = corner<DT>(acc, th.l1, tw.l0, v);
                        if (th.i1 == h && tw.i1 == w) acc = corner<DT>(acc, th.l1, tw.l1, v);
                    }
                }
            }
        }
        gm_pl_st<DT>(dinp, i, acc);
    }
}

extern "C" int cuda_resize2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt,
                                     const resize2d_geom *g, gm_cuda_ctx *ctx) {
    if (!g || !resize_geom_ok(g)) return GM_ERR_ARG;
    resize_axis ah, aw;
    resize_make_axes(g, dt == GM_F64, &ah, &aw);
    GM_PL_LAUNCH_AND_RETURN(resize_fwd, dt, g->N * g->C * g->OH * g->OW, ctx, out, inp, gm_pl_st4_of(in), *g, ah,
                            aw);
}

extern "C" int cuda_resize2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt,
                                      const resize2d_geom *g, gm_cuda_ctx *ctx) {
    if (!g || !resize_geom_ok(g)) return GM_ERR_ARG;
    resize_axis ah, aw;
    resize_make_axes(g, dt == GM_F64, &ah, &aw);
    GM_PL_LAUNCH_AND_RETURN(resize_bwd, dt, g->N * g->C * g->H * g->W, ctx, dinp, dout, gm_pl_st4_of(ds), *g, ah,
                            aw);
}
