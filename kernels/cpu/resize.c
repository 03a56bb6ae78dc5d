/* kernels/cpu/resize.c — nearest / nearest-exact / bilinear resizing, forward and backward (resize.h).
 *
 * Every output pixel reads at most a 2x2 neighbourhood chosen by one source coordinate per axis. The forward
 * splits output rows (n, c, oh) across threads; the backward scatters into input planes, one thread per (n, c)
 * plane, so no two threads add into the same element. Coordinates follow the formulas of PyTorch's NCHW kernels
 * in its precision: a different rounding would pick a different source pixel at exact boundaries, a visible
 * difference for nearest. The backward uses the forward's own coordinates, so it is the exact adjoint (PyTorch's
 * 1-D nearest backward uses nearest_idx, whose out == in and out == 2*in shortcuts disagree with its 1-D forward
 * when a scale factor is given that is not exactly out/in). */
#include "resize.h"

/* Below this many output elements, a parallel region costs more than it saves. */
#define RESIZE_PARALLEL_GRAIN 32768

/* One axis of the mapping: output index o reads input i0 with weight l0 and i1 with weight l1 (l1 = 0 for the
 * nearest modes). */
typedef struct {
    int64_t i0, i1;
    double l0, l1;
} tap;

/* One axis of the problem with its ratio computed once, in float and in double (PyTorch's
 * area_pixel_compute_scale: (in-1)/(out-1) when aligning corners, else compute_scales_value: 1/scale when the
 * caller gave a scale factor, else in/out). */
typedef struct {
    int64_t in, out;
    int mode, align, f64, is_1d;
    float rf;
    double rd;
} axis;

static axis make_axis(int64_t in, int64_t out, double scale, const resize2d_geom *g, int f64) {
    axis a = {in, out, g->mode, g->mode == RESIZE_BILINEAR && g->align_corners, f64, g->is_1d, 0.0f, 0.0};
    if (a.align) {
        a.rf = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
        a.rd = out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
    } else {
        a.rf = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
        a.rd = scale > 0 ? 1.0 / scale : (double)in / (double)out;
    }
    return a;
}

/* Source taps of output index o, as PyTorch's CPU kernels compute them (checked against PyTorch 2.15):
 *   2-D nearest        nearest_idx: o if out == in, o / 2 if out == 2 * in, else floor(o * r), in float
 *   2-D nearest-exact  nearest_exact_idx: floor((o + 0.5) * r), r in float
 *   1-D nearest        HelperInterpNearest: floor(o * r), no shortcuts
 *   1-D nearest-exact  HelperInterpNearestExact: floor(max((o + 0.5) * r - 0.5, 0) + 0.5)
 *   bilinear           x = o * r (aligned) or max((o + 0.5) * r - 0.5, 0); i0 = floor(x), lambda = x - i0
 *                      (compute_source_index_and_lambda; an unchanged size is an exact copy)
 * The 1-D and bilinear forms compute in float, or in double for float64 but floored through float as PyTorch's
 * floorf does. Every coordinate is non-negative, so the truncating cast is the floor (no libm call per pixel). */
static inline tap axis_tap(const axis *a, int64_t o) {
    tap t;
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
        else i = (int64_t)((float)o * a->rf);
        t.i0 = t.i1 = i < a->in - 1 ? i : a->in - 1;
        t.l0 = 1.0, t.l1 = 0.0;
        return t;
    }
    if (a->f64) {
        real = a->mode == RESIZE_NEAREST || a->align ? a->rd * (double)o : a->rd * ((double)o + 0.5) - 0.5;
        if (real < 0.0) real = 0.0;
        if (a->mode == RESIZE_NEAREST_EXACT) real += 0.5;
        i = (int64_t)(float)real;
    } else {
        float rf = a->mode == RESIZE_NEAREST || a->align ? a->rf * (float)o : a->rf * ((float)o + 0.5f) - 0.5f;
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

static int geom_ok(const resize2d_geom *g) {
    return g->N >= 0 && g->C >= 0 && g->H > 0 && g->W > 0 && g->OH > 0 && g->OW > 0 &&
           (g->mode == RESIZE_NEAREST || g->mode == RESIZE_NEAREST_EXACT || g->mode == RESIZE_BILINEAR);
}

static int team(int nthreads, int64_t items, int64_t work) {
    if (nthreads < 1 || work < RESIZE_PARALLEL_GRAIN) return 1;
    return items < nthreads ? (int)(items > 0 ? items : 1) : nthreads;
}

/* Column taps are computed once per block of RESIZE_COLS columns and reused by every row of a block of
 * RESIZE_ROWS rows (forward) or by every row of a plane (backward), kept on the stack: 256 taps are 8 KiB. */
#define RESIZE_COLS 256
#define RESIZE_ROWS 32

static void column_taps(tap *tw, const axis *aw, int64_t c0, int64_t n) {
    for (int64_t j = 0; j < n; j++) tw[j] = axis_tap(aw, c0 + j);
}

/* Output row r, columns [c0, c0 + n) with their taps tw. */
static inline __attribute__((always_inline)) void resize_row(gm_dtype dt, void *out, const void *inp,
                                                             const int64_t in[4], const resize2d_geom *g,
                                                             const axis *ah, const tap *tw, int64_t c0, int64_t n,
                                                             int64_t r) {
    const int64_t oh = r % g->OH, nc = r / g->OH, b = nc / g->C, c = nc % g->C;
    const tap th = axis_tap(ah, oh);
    const int64_t r0 = b * in[0] + c * in[1] + th.i0 * in[2], r1 = b * in[0] + c * in[1] + th.i1 * in[2];
    const int64_t o = r * g->OW + c0;
    if (g->mode != RESIZE_BILINEAR) {
        for (int64_t j = 0; j < n; j++) pool_st(dt, out, o + j, pool_ld(dt, inp, r0 + tw[j].i0 * in[3]));
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        const int64_t x0 = tw[j].i0 * in[3], x1 = tw[j].i1 * in[3];
        const double v = th.l0 * (tw[j].l0 * pool_ld(dt, inp, r0 + x0) + tw[j].l1 * pool_ld(dt, inp, r0 + x1)) +
                         th.l1 * (tw[j].l0 * pool_ld(dt, inp, r1 + x0) + tw[j].l1 * pool_ld(dt, inp, r1 + x1));
        pool_st(dt, out, o + j, v);
    }
}

int resize2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt, const resize2d_geom *g,
                     int nthreads) {
    if (!geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    const int64_t rows = g->N * g->C * g->OH, blocks = (rows + RESIZE_ROWS - 1) / RESIZE_ROWS;
    const int nt = team(nthreads, blocks, rows * g->OW);
    const axis ah = make_axis(g->H, g->OH, g->scale_h, g, dt == GM_F64);
    const axis aw = make_axis(g->W, g->OW, g->scale_w, g, dt == GM_F64);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t blk = 0; blk < blocks; blk++) {
        tap tw[RESIZE_COLS];
        const int64_t r_end = (blk + 1) * RESIZE_ROWS < rows ? (blk + 1) * RESIZE_ROWS : rows;
        for (int64_t c0 = 0; c0 < g->OW; c0 += RESIZE_COLS) {
            const int64_t n = g->OW - c0 < RESIZE_COLS ? g->OW - c0 : RESIZE_COLS;
            column_taps(tw, &aw, c0, n);
            for (int64_t r = blk * RESIZE_ROWS; r < r_end; r++)
                POOL_DISPATCH(dt, resize_row(DT, out, inp, in, g, &ah, tw, c0, n, r));
        }
    }
    return GM_OK;
}

static inline __attribute__((always_inline)) void add_at(gm_dtype dt, void *plane, int64_t i, double v) {
    pool_st(dt, plane, i, pool_ld(dt, plane, i) + v);
}

static inline __attribute__((always_inline)) void resize_plane_bwd(gm_dtype dt, void *dinp, const void *dout,
                                                                   const int64_t ds[4], const resize2d_geom *g,
                                                                   const axis *ah, const axis *aw, int64_t p) {
    const int64_t b = p / g->C, c = p % g->C, HW = g->H * g->W, W = g->W;
    const int64_t obase = b * ds[0] + c * ds[1];
    char *plane = (char *)dinp + p * HW * (int64_t)gm_dtype_size(dt);
    tap tw[RESIZE_COLS];
    memset(plane, 0, (size_t)HW * gm_dtype_size(dt));
    for (int64_t c0 = 0; c0 < g->OW; c0 += RESIZE_COLS) {
        const int64_t n = g->OW - c0 < RESIZE_COLS ? g->OW - c0 : RESIZE_COLS;
        column_taps(tw, aw, c0, n);
        for (int64_t oh = 0; oh < g->OH; oh++) {
            const tap th = axis_tap(ah, oh);
            const int64_t orow = obase + oh * ds[2] + c0 * ds[3];
            for (int64_t j = 0; j < n; j++) {
                const double v = pool_ld(dt, dout, orow + j * ds[3]);
                if (g->mode != RESIZE_BILINEAR) {
                    add_at(dt, plane, th.i0 * W + tw[j].i0, v);
                } else {
                    add_at(dt, plane, th.i0 * W + tw[j].i0, th.l0 * tw[j].l0 * v);
                    add_at(dt, plane, th.i0 * W + tw[j].i1, th.l0 * tw[j].l1 * v);
                    add_at(dt, plane, th.i1 * W + tw[j].i0, th.l1 * tw[j].l0 * v);
                    add_at(dt, plane, th.i1 * W + tw[j].i1, th.l1 * tw[j].l1 * v);
                }
            }
        }
    }
}

int resize2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt, const resize2d_geom *g,
                      int nthreads) {
    if (!geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    const int64_t planes = g->N * g->C;
    const int nt = team(nthreads, planes, planes * (g->H * g->W + g->OH * g->OW));
    const axis ah = make_axis(g->H, g->OH, g->scale_h, g, dt == GM_F64);
    const axis aw = make_axis(g->W, g->OW, g->scale_w, g, dt == GM_F64);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t p = 0; p < planes; p++) POOL_DISPATCH(dt, resize_plane_bwd(DT, dinp, dout, ds, g, &ah, &aw, p));
    return GM_OK;
}
