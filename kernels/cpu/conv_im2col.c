/* kernels/cpu/conv_im2col.c — the column matrix of the im2col passes: im2col gathers it from the input (any
 * strides, 0 in the padding), col2im scatters it back as the input-gradient (its adjoint), and fill_rows writes
 * the bias (or zeros) that the gemm then adds onto. float32 and float64; the half passes widen in conv_half.c. */
#ifndef CONV_T

#include "conv_internal.h"

#define CONV_TEMPLATE "conv_im2col.c"
#include "conv_typed.h"

#else /* ================ typed part: T is CONV_T, FN(name) is name_<suffix> ================================ */


/* Rows [j0, j1) of the im2col matrix of item n, group grp, output positions [s0, s0 + cnt): col (Cg*R*S, cnt)
 * row-major with rows ld >= cnt apart, row (c, r, s) holding inp[n, grp*Cg + c, p*sh - ph + r*dh,
 * q*sw - pw + s*dw] (0 in the padding) for position p*Q + q. Only rows [j0, j1) of col are written.
 * Deep layers have short output rows (14 or 7 positions) and a column matrix ~R*S times the input, so the
 * per-segment cost matters (it was ~20 % of the 256->256 14x14 forward): the output row advances without a
 * division, and the copies and zero fills are inline loops, not memcpy/memset calls for 14 floats (GCC would
 * turn the loops back into such calls: no-tree-loop-distribute-patterns keeps them loops). */
__attribute__((optimize("no-tree-loop-distribute-patterns")))
void FN(conv_im2col)(T *col, int64_t ld, const T *x, const conv_geom *g, int64_t n, int64_t grp, int64_t s0,
                     int64_t cnt, int64_t j0, int64_t j1) {
    const int64_t Cg = g->C / g->G, R = g->R, S = g->S, Q = g->Q, H = g->H, sh = g->sh, sw = g->sw;
    const int64_t xs1 = g->xs[1], xs2 = g->xs[2], xs3 = g->xs[3];
    const int contig = sw == 1 && xs3 == 1;
    const T *xg = x + n * g->xs[0] + grp * Cg * xs1;
    if (cnt <= 0 || Q <= 0) return;
    const int64_t p_first = s0 / Q, q_first = s0 - p_first * Q, end = s0 + cnt;
    for (int64_t row = j0; row < j1; row++) {
        const int64_t c = row / (R * S), r = row / S % R, s = row % S, off = s * g->dw - g->pw;
        const T *xc = xg + c * xs1;
        int64_t qa, qb;
        valid_cols(off, sw, g->W, Q, &qa, &qb);
        int64_t h = p_first * sh - g->ph + r * g->dh, q0 = q_first;
        T *d = col + row * ld - q0; /* d[q] for q in [q0, q1) of the current output row */
        for (int64_t pos = s0; pos < end; h += sh, q0 = 0) {
            const int64_t q1 = min64(Q, q0 + end - pos);
            if (h < 0 || h >= H) {
                for (int64_t q = q0; q < q1; q++) d[q] = 0;
            } else {
                const T *xr = xc + h * xs2;
                const int64_t a = min64(max64(qa, q0), q1), b = min64(max64(qb, a), q1);
                for (int64_t q = q0; q < a; q++) d[q] = 0;
                if (contig) {
                    const T *sp = xr + off;
                    for (int64_t q = a; q < b; q++) d[q] = sp[q];
                } else if (sw == 2 && xs3 == 1) { /* stride 2 (downsampling 1x1 and 3x3): vectorized by GCC */
                    const T *sp = xr + off;
                    for (int64_t q = a; q < b; q++) d[q] = sp[2 * q];
                } else {
                    for (int64_t q = a; q < b; q++) d[q] = xr[(q * sw + off) * xs3];
                }
                for (int64_t q = b; q < q1; q++) d[q] = 0;
            }
            pos += q1 - q0;
            d += q1; /* the next output row starts right after this one's q1 - q0 columns, at its q = 0 */
        }
    }
}

/* The adjoint of im2col for channels [c0, c1): dx (c1 - c0, H, W), channel c0's plane first (contiguous), += the
 * columns of positions [s0, s0 + cnt) in col, whose first row is channel c0's (r, s) = (0, 0); rows cnt apart. */
void FN(conv_col2im)(T *dx, const T *col, const conv_geom *g, int64_t c0, int64_t c1, int64_t s0, int64_t cnt) {
    FN(conv_col2im_ld)(dx, col, cnt, g, c0, c1, s0, cnt);
}

/* conv_col2im over a col whose rows are ld >= cnt apart (an item's share of a tile of several items). */
void FN(conv_col2im_ld)(T *dx, const T *col, int64_t ld, const conv_geom *g, int64_t c0, int64_t c1, int64_t s0,
                        int64_t cnt) {
    const int64_t R = g->R, S = g->S, Q = g->Q, H = g->H, W = g->W;
    for (int64_t c = c0; c < c1; c++) {
        T *dxc = dx + (c - c0) * H * W;
        for (int64_t r = 0; r < R; r++) {
            for (int64_t s = 0; s < S; s++) {
                const int64_t off = s * g->dw - g->pw;
                const T *src = col + (((c - c0) * R + r) * S + s) * ld;
                int64_t qa, qb;
                valid_cols(off, g->sw, W, Q, &qa, &qb);
                for (int64_t pos = s0, end = s0 + cnt; pos < end;) {
                    const int64_t p = pos / Q, q0 = pos - p * Q, q1 = min64(Q, q0 + end - pos);
                    const int64_t h = p * g->sh - g->ph + r * g->dh;
                    if (h >= 0 && h < H) {
                        const T *sp = src + (pos - s0) - q0;
                        T *dr = dxc + h * W;
                        const int64_t a = min64(max64(qa, q0), q1), b = min64(max64(qb, a), q1);
                        if (g->sw == 1) {
                            T *d = dr + off;
                            for (int64_t q = a; q < b; q++) d[q] += sp[q];
                        } else if (g->sw == 2) {
                            T *d = dr + off;
                            for (int64_t q = a; q < b; q++) d[2 * q] += sp[q];
                        } else {
                            for (int64_t q = a; q < b; q++) dr[q * g->sw + off] += sp[q];
                        }
                    }
                    pos += q1 - q0;
                }
            }
        }
    }
}

/* rows (n) of dst, each len long and ld apart, set to vals[i] (0 when vals is NULL). */
void FN(conv_fill_rows)(T *dst, const T *vals, int64_t n, int64_t len, int64_t ld) {
    for (int64_t i = 0; i < n; i++) {
        T v = vals ? vals[i] : 0, *d = dst + i * ld;
        for (int64_t j = 0; j < len; j++) d[j] = v;
    }
}

#endif
