/* kernels/resize_taps.h — the source-index arithmetic of interpolation, shared by kernels/cpu/resize.c and
 * kernels/cuda/resize.cu (kernels/README.md): which input pixels each output index reads, and with which weights.
 *
 * Why one header for both backends: the CUDA kernels promise results bit-identical to the CPU's, and a
 * different rounding here picks a different source pixel. Written once, as inline functions that gcc compiles
 * for the host and nvcc also for the device (those marked GM_HD, kernels/common.h), as philox.h does. Not part of
 * the interface (kernels/cpu/resize.h and kernels/cuda/resize.h are). */
#ifndef GM_KERNELS_RESIZE_TAPS_H
#define GM_KERNELS_RESIZE_TAPS_H

#include "resize_geom.h"

/* a * b rounded once and never fused with a following addition: the CPU build has no FMA, but nvcc contracts
 * a*b+c into one fma by default, which would round differently. Plain products on the host. */
GM_HD static inline double resize_mul(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

GM_HD static inline float resize_mulf(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

static inline int resize_geom_ok(const resize2d_geom *g) {
    return g->N >= 0 && g->C >= 0 && g->H > 0 && g->W > 0 && g->OH > 0 && g->OW > 0 &&
           (g->mode == RESIZE_NEAREST || g->mode == RESIZE_NEAREST_EXACT || g->mode == RESIZE_BILINEAR);
}

/* One axis of the mapping: output index o reads input i0 with weight l0 and i1 with weight l1 (l1 = 0 for the
 * nearest modes). */
typedef struct {
    int64_t i0, i1;
    double l0, l1;
} resize_tap;

/* One axis of the problem with its ratio computed once, in float and in double (PyTorch's
 * area_pixel_compute_scale: (in-1)/(out-1) when aligning corners, else compute_scales_value: 1/scale when the
 * caller gave a scale factor, else in/out). */
typedef struct {
    int64_t in, out;
    int mode, align, f64, is_1d;
    float rf;
    double rd;
} resize_axis;

static inline resize_axis resize_make_axis(int64_t in, int64_t out, double scale, const resize2d_geom *g, int f64) {
    resize_axis a = {in, out, g->mode, g->mode == RESIZE_BILINEAR && g->align_corners, f64, g->is_1d, 0.0f, 0.0};
    if (a.align) {
        a.rf = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
        a.rd = out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
    } else {
        a.rf = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
        a.rd = scale > 0 ? 1.0 / scale : (double)in / (double)out;
    }
    return a;
}

/* Both axes of g, computed in double for float64 and in float for the other dtypes. */
static inline void resize_make_axes(const resize2d_geom *g, int f64, resize_axis *ah, resize_axis *aw) {
    *ah = resize_make_axis(g->H, g->OH, g->scale_h, g, f64);
    *aw = resize_make_axis(g->W, g->OW, g->scale_w, g, f64);
}

/* Source taps of output index o, as PyTorch's CPU kernels compute them (checked against PyTorch 2.15):
 *   2-D nearest        nearest_idx: o if out == in, o / 2 if out == 2 * in, else floor(o * r), in float
 *   2-D nearest-exact  nearest_exact_idx: floor((o + 0.5) * r), r in float
 *   1-D nearest        HelperInterpNearest: floor(o * r), no shortcuts
 *   1-D nearest-exact  HelperInterpNearestExact: floor(max((o + 0.5) * r - 0.5, 0) + 0.5)
 *   bilinear           x = o * r (aligned) or max((o + 0.5) * r - 0.5, 0); i0 = floor(x), lambda = x - i0
 *                      (compute_source_index_and_lambda; an unchanged size is an exact copy)
 * The 1-D and bilinear forms compute in float, or in double for float64 but floored through float as PyTorch's
 * floorf does. Every coordinate is non-negative, so the truncating cast is the floor (no libm call per pixel).
 * Products that are followed by an addition go through resize_mul / resize_mulf. */
GM_HD static inline resize_tap resize_axis_tap(const resize_axis *a, int64_t o) {
    resize_tap t;
    int64_t i;
    double real;
    if (a->mode == RESIZE_BILINEAR && a->out == a->in) {
        t.i0 = t.i1 = o;
        t.l0 = 1.0, t.l1 = 0.0;
        return t;
    }
    if (a->mode != RESIZE_BILINEAR && !a->is_1d) {
        if (a->mode == RESIZE_NEAREST_EXACT) i = (int64_t)(float)(((double)o + 0.5) * (double)a->rf);
        else if (a->out == a->in) i = o;
        else if (a->out == 2 * a->in) i = o >> 1;
        else i = (int64_t)resize_mulf((float)o, a->rf);
        t.i0 = t.i1 = i < a->in - 1 ? i : a->in - 1;
        t.l0 = 1.0, t.l1 = 0.0;
        return t;
    }
    if (a->f64) {
        real = a->mode == RESIZE_NEAREST || a->align ? resize_mul(a->rd, (double)o)
                                                      : resize_mul(a->rd, (double)o + 0.5) - 0.5;
        if (real < 0.0) real = 0.0;
        if (a->mode == RESIZE_NEAREST_EXACT) real += 0.5;
        i = (int64_t)(float)real;
    } else {
        float rf = a->mode == RESIZE_NEAREST || a->align ? resize_mulf(a->rf, (float)o)
                                                          : resize_mulf(a->rf, (float)o + 0.5f) - 0.5f;
        if (rf < 0.0f) rf = 0.0f; /* PyTorch clamps negative source coordinates to 0 */
        if (a->mode == RESIZE_NEAREST_EXACT) rf += 0.5f;
        real = rf;
        i = (int64_t)rf;
    }
    if (i > a->in - 1) i = a->in - 1;
    t.i0 = i;
    if (a->mode != RESIZE_BILINEAR) {
        t.i1 = i;
        t.l0 = 1.0, t.l1 = 0.0;
        return t;
    }
    t.i1 = i + (i < a->in - 1 ? 1 : 0);
    if (a->f64) {
        double l1 = real - (double)i;
        t.l1 = l1 < 0.0 ? 0.0 : l1 > 1.0 ? 1.0 : l1;
        t.l0 = 1.0 - t.l1;
    } else {
        float l1 = (float)real - (float)i;
        l1 = l1 < 0.0f ? 0.0f : l1 > 1.0f ? 1.0f : l1;
        t.l1 = l1;
        t.l0 = 1.0f - l1;
    }
    return t;
}

#endif
