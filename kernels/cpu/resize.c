/* kernels/cpu/resize.c — nearest / nearest-exact / bilinear resizing, forward and backward (resize.h).
 *
 * Every output pixel reads at most a 2x2 neighbourhood chosen by one source coordinate per axis. The forward
 * splits output rows (n, c, oh) across threads; the backward scatters into input planes, one thread per (n, c)
 * plane, so no two threads add into the same element. Coordinates follow the formulas of PyTorch's NCHW kernels
 * in its precision: a different rounding would pick a different source pixel at exact boundaries, a visible
 * difference for nearest (those formulas live in resize_taps.h, shared with kernels/cuda/resize.cu, which must
 * pick the same pixels). The backward uses the forward's own coordinates, so it is the exact adjoint (PyTorch's
 * 1-D nearest backward uses nearest_idx, whose out == in and out == 2*in shortcuts disagree with its 1-D forward
 * when a scale factor is given that is not exactly out/in). */
#include "resize.h"
#include "../resize_taps.h"

/* Column taps are computed once per block of RESIZE_COLS columns and reused by every row of a block of
 * RESIZE_ROWS rows (forward) or by every row of a plane (backward), kept on the stack: 256 taps are 8 KiB. */
#define RESIZE_COLS 256
#define RESIZE_ROWS 32

static void column_taps(resize_tap *tw, const resize_axis *aw, int64_t c0, int64_t n) {
    for (int64_t j = 0; j < n; j++) tw[j] = resize_axis_tap(aw, c0 + j);
}

/* Output row r, columns [c0, c0 + n) with their taps tw. */
static inline __attribute__((always_inline)) void resize_row(gm_dtype dt, void *out, const void *inp,
                                                             const int64_t in[4], const resize2d_geom *g,
                                                             const resize_axis *ah, const resize_tap *tw,
                                                             int64_t c0, int64_t n, int64_t r) {
    const int64_t oh = r % g->OH, nc = r / g->OH, b = nc / g->C, c = nc % g->C;
    const resize_tap th = resize_axis_tap(ah, oh);
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
    if (!resize_geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    const int64_t rows = g->N * g->C * g->OH, blocks = (rows + RESIZE_ROWS - 1) / RESIZE_ROWS;
    const int nt = pool_team(nthreads, blocks, rows * g->OW);
    resize_axis ah, aw;
    resize_make_axes(g, dt == GM_F64, &ah, &aw);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t blk = 0; blk < blocks; blk++) {
        resize_tap tw[RESIZE_COLS];
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

static inline __attribute__((always_inline)) void resize_plane_bwd(gm_dtype dt, void *dinp, const void *dout,
                                                                   const int64_t ds[4], const resize2d_geom *g,
                                                                   const resize_axis *ah, const resize_axis *aw,
                                                                   int64_t p) {
    const int64_t b = p / g->C, c = p % g->C, HW = g->H * g->W, W = g->W;
    const int64_t obase = b * ds[0] + c * ds[1];
    char *plane = (char *)dinp + p * HW * (int64_t)gm_dtype_size(dt);
    resize_tap tw[RESIZE_COLS];
    memset(plane, 0, (size_t)HW * gm_dtype_size(dt));
    for (int64_t c0 = 0; c0 < g->OW; c0 += RESIZE_COLS) {
        const int64_t n = g->OW - c0 < RESIZE_COLS ? g->OW - c0 : RESIZE_COLS;
        column_taps(tw, aw, c0, n);
        for (int64_t oh = 0; oh < g->OH; oh++) {
            const resize_tap th = resize_axis_tap(ah, oh);
            const int64_t orow = obase + oh * ds[2] + c0 * ds[3];
            for (int64_t j = 0; j < n; j++) {
                const double v = pool_ld(dt, dout, orow + j * ds[3]);
                if (g->mode != RESIZE_BILINEAR) {
                    pool_add_at(dt, plane, th.i0 * W + tw[j].i0, v);
                } else {
                    pool_add_at(dt, plane, th.i0 * W + tw[j].i0, th.l0 * tw[j].l0 * v);
                    pool_add_at(dt, plane, th.i0 * W + tw[j].i1, th.l0 * tw[j].l1 * v);
                    pool_add_at(dt, plane, th.i1 * W + tw[j].i0, th.l1 * tw[j].l0 * v);
                    pool_add_at(dt, plane, th.i1 * W + tw[j].i1, th.l1 * tw[j].l1 * v);
                }
            }
        }
    }
}

int resize2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt, const resize2d_geom *g,
                      int nthreads) {
    if (!resize_geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    const int64_t planes = g->N * g->C;
    const int nt = pool_team(nthreads, planes, planes * (g->H * g->W + g->OH * g->OW));
    resize_axis ah, aw;
    resize_make_axes(g, dt == GM_F64, &ah, &aw);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t p = 0; p < planes; p++) POOL_DISPATCH(dt, resize_plane_bwd(DT, dinp, dout, ds, g, &ah, &aw, p));
    return GM_OK;
}
